"""SqueezeNet 1.0 and 1.1: torchvision's layout, counts and init."""

import math

import pytest
from vision_checks import ClassifierTests, assert_constant, assert_normal_std, assert_uniform_bound, fan_in

import flopcount.runtime as rt
from flopcount.models.squeezenet import SqueezeNet


class TestSqueezeNet(ClassifierTests):
    PUBLISHED_PARAMS = {"squeezenet1_0": 1_248_424, "squeezenet1_1": 1_235_496}
    PUBLISHED_GMACS = {"squeezenet1_0": 0.819, "squeezenet1_1": 0.349}

    def test_torchvision_init(self, name, eager):
        model, _ = eager
        final = model.classifier[1]
        assert_normal_std(final.weight, 0.01)
        convs = [m for m in model.modules() if isinstance(m, rt.nn.Conv2d)]
        assert len(convs) == 1 + 3 * 8 + 1
        for conv in convs:
            assert_constant(conv.bias, 0)
        for conv in (convs[0], convs[-2]):  # He uniform (gain sqrt(2), fan_in)
            assert_uniform_bound(conv.weight, math.sqrt(6 / fan_in(conv.weight)))

    def test_unknown_version_is_refused(self):
        with pytest.raises(ValueError, match="1_0 or 1_1"):
            SqueezeNet("1_2")
