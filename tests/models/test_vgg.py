"""VGG 11/16 with and without batch norm: torchvision's layout, counts and init."""

import math

from vision_checks import ClassifierTests, assert_constant, assert_normal_std, fan_out

import flopcount.runtime as rt


class TestVGG(ClassifierTests):
    PUBLISHED_PARAMS = {"vgg11": 132_863_336, "vgg11_bn": 132_868_840,
                        "vgg16": 138_357_544, "vgg16_bn": 138_365_992}
    PUBLISHED_GMACS = {"vgg11": 7.609, "vgg11_bn": 7.609, "vgg16": 15.47, "vgg16_bn": 15.47}

    def test_torchvision_init(self, name, eager):
        model, _ = eager
        convs = [m for m in model.features if isinstance(m, rt.nn.Conv2d)]
        norms = [m for m in model.features if isinstance(m, rt.nn.BatchNorm2d)]
        assert len(convs) == (8 if name.startswith("vgg11") else 13)
        assert len(norms) == (len(convs) if name.endswith("_bn") else 0)
        for conv in (convs[0], convs[-1]):  # He normal, fan_out mode
            assert_normal_std(conv.weight, math.sqrt(2 / fan_out(conv.weight)))
            assert_constant(conv.bias, 0)
        for norm in norms:
            assert_constant(norm.weight, 1)
            assert_constant(norm.bias, 0)
        for linear in (model.classifier[0], model.classifier[6]):
            assert_normal_std(linear.weight, 0.01)
            assert_constant(linear.bias, 0)
