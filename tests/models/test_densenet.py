"""DenseNet-121: torchvision's layout, counts and init."""

import math

import pytest
from vision_checks import ClassifierTests, assert_constant, assert_normal_std, fan_in, meta_model

import flopcount.runtime as rt
from flopcount.models.densenet import DenseNet


class TestDenseNet(ClassifierTests):
    PUBLISHED_PARAMS = {"densenet121": 7_978_856}
    PUBLISHED_GMACS = {"densenet121": 2.834}

    def test_torchvision_init(self, name, eager):
        model, _ = eager
        block = model.features.denseblock3
        for conv in (model.features.conv0, block.denselayer24.conv2, model.features.transition3.conv):
            assert_normal_std(conv.weight, math.sqrt(2 / fan_in(conv.weight)))  # He normal, fan_in
        for norm in (model.features.norm0, block.denselayer1.norm2, model.features.norm5):
            assert_constant(norm.weight, 1)
            assert_constant(norm.bias, 0)
        assert_constant(model.classifier.bias, 0)


def test_channel_growth():
    # block i adds layers * growth_rate channels; each transition halves them: 64 -> 256 -> 128 ->
    # 512 -> 256 -> 1024 -> 512 -> 1024
    model = meta_model("densenet121")
    features = model.features
    assert features.transition1.conv.weight.shape == (128, 256, 1, 1)
    assert features.transition2.conv.weight.shape == (256, 512, 1, 1)
    assert features.transition3.conv.weight.shape == (512, 1024, 1, 1)
    assert features.denseblock4.denselayer16.norm1.weight.shape == (512 + 15 * 32,)
    assert model.classifier.weight.shape == (1000, 1024)


def test_memory_efficient_is_refused():
    with rt.meta(), pytest.raises(NotImplementedError, match="memory_efficient"):
        DenseNet(memory_efficient=True)
