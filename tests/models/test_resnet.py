"""ResNet 18-152, ResNeXt-50 32x4d, Wide ResNet-50-2: torchvision's layout, counts and init."""

import math

import numpy as np
from vision_checks import (ClassifierTests, assert_constant, assert_normal_std, assert_uniform_bound,
                           conv_linear_macs, fan_out, meta_forward, meta_model, values)

import flopcount.runtime as rt
from flopcount import models


class TestResNet(ClassifierTests):
    PUBLISHED_PARAMS = {
        "resnet18": 11_689_512, "resnet34": 21_797_672, "resnet50": 25_557_032,
        "resnet101": 44_549_160, "resnet152": 60_192_808,
        "resnext50_32x4d": 25_028_904, "wide_resnet50_2": 68_883_240,
    }
    PUBLISHED_GMACS = {
        "resnet18": 1.814, "resnet34": 3.664, "resnet50": 4.089, "resnet101": 7.801, "resnet152": 11.514,
        "resnext50_32x4d": 4.23, "wide_resnet50_2": 11.398,
    }

    def test_torchvision_init(self, name, eager):
        model, _ = eager
        for conv in (model.conv1, model.layer4[-1].conv1, model.layer2[0].downsample[0]):
            assert_normal_std(conv.weight, math.sqrt(2 / fan_out(conv.weight)))
        norms = [m for m in model.modules() if isinstance(m, rt.nn.BatchNorm2d)]
        for norm in norms:
            assert_constant(norm.weight, 1)
            assert_constant(norm.bias, 0)
        # the fc keeps Linear's own init: U(±1/sqrt(in_features)) for weight and bias
        bound = 1 / math.sqrt(model.fc.in_features)
        assert_uniform_bound(model.fc.weight, bound)
        assert np.abs(values(model.fc.bias)).max() <= bound


def test_resnet50_golden_macs():
    # The project's golden number: torchvision's ResNet-50 v1.5 at 1x3x224x224, conv + linear
    _, events = meta_forward(meta_model("resnet50"), "resnet50")
    assert conv_linear_macs(events) == 4_089_184_256


def test_resnet50_is_v1_5_stride_on_the_3x3_conv():
    model = meta_model("resnet50")
    first = model.layer2[0]
    assert first.conv1.stride == (1, 1) and first.conv2.stride == (2, 2)
    assert first.downsample[0].stride == (2, 2)


def test_resnext_and_wide_widths():
    resnext, wide = meta_model("resnext50_32x4d"), meta_model("wide_resnet50_2")
    # width = planes * width_per_group / 64 * groups: 64 * 4/64 * 32 = 128, and 64 * 128/64 = 128
    assert resnext.layer1[0].conv2.weight.shape == (128, 128 // 32, 3, 3)
    assert resnext.layer1[0].conv2.groups == 32
    assert wide.layer1[0].conv2.weight.shape == (128, 128, 3, 3)


def test_zero_init_residual_zeroes_the_last_norm_of_each_block():
    model = models.get("resnet18", zero_init_residual=True)
    for block in (model.layer1[0], model.layer4[1]):
        assert_constant(block.bn2.weight, 0)
        assert_constant(block.bn1.weight, 1)


def test_replace_stride_with_dilation_keeps_the_resolution():
    model = meta_model("resnet50", replace_stride_with_dilation=[False, True, True]).eval()
    x = models.example_input("resnet50", device="meta")
    x = model.maxpool(model.relu(model.bn1(model.conv1(x))))
    out = model.layer4(model.layer3(model.layer2(model.layer1(x))))
    assert out.shape == (1, 2048, 28, 28)  # output stride 8 instead of 32
    assert model.layer4[1].conv2.dilation == (4, 4)
