"""AlexNet: torchvision's layout, counts and PyTorch's default layer initialization."""

import math

import numpy as np

from vision_checks import ClassifierTests, assert_uniform_bound, fan_in, values


class TestAlexNet(ClassifierTests):
    PUBLISHED_PARAMS = {"alexnet": 61_100_840}
    PUBLISHED_GMACS = {"alexnet": 0.714}

    def test_default_layer_init(self, name, eager):
        # torchvision leaves AlexNet to the layers' own init: weight and bias U(±1/sqrt(fan_in))
        model, _ = eager
        for layer in (model.features[0], model.features[10], model.classifier[1], model.classifier[6]):
            bound = 1 / math.sqrt(fan_in(layer.weight))
            assert_uniform_bound(layer.weight, bound)
            assert np.abs(values(layer.bias)).max() <= bound
        assert_uniform_bound(model.classifier[6].bias, 1 / math.sqrt(4096))
