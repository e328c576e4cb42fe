"""MobileNet V2 and V3 (large, small): torchvision's layout, counts, init and block tables."""

import math

import pytest
from vision_checks import ClassifierTests, assert_constant, assert_normal_std, fan_out, meta_model

import flopcount.runtime as rt
from flopcount.models.mobilenet import mobilenet_v3


class TestMobileNet(ClassifierTests):
    PUBLISHED_PARAMS = {"mobilenet_v2": 3_504_872, "mobilenet_v3_large": 5_483_032,
                        "mobilenet_v3_small": 2_542_856}
    PUBLISHED_GMACS = {"mobilenet_v2": 0.301, "mobilenet_v3_large": 0.217, "mobilenet_v3_small": 0.057}

    def test_torchvision_init(self, name, eager):
        model, _ = eager
        convs = sorted((m for m in model.modules() if isinstance(m, rt.nn.Conv2d)), key=lambda m: m.weight.numel())
        for conv in convs[-3:]:  # the largest, so the sample spread is a tight estimate
            assert_normal_std(conv.weight, math.sqrt(2 / fan_out(conv.weight)))
        for norm in (m for m in model.modules() if isinstance(m, rt.nn.BatchNorm2d)):
            assert_constant(norm.weight, 1)
            assert_constant(norm.bias, 0)
        for linear in (m for m in model.modules() if isinstance(m, rt.nn.Linear)):
            assert_normal_std(linear.weight, 0.01)
            assert_constant(linear.bias, 0)


def test_v2_blocks_and_residuals():
    model = meta_model("mobilenet_v2")
    blocks = list(model.features)[1:-1]
    assert len(blocks) == 17
    assert [b.use_res_connect for b in blocks[:4]] == [False, False, True, False]
    # the first block has expand ratio 1: depthwise, projection conv, norm; the rest also expand
    assert len(blocks[0].conv) == 3 and len(blocks[1].conv) == 4
    assert blocks[1].conv[0][0].weight.shape == (96, 16, 1, 1)
    assert isinstance(blocks[1].conv[0][2], rt.nn.ReLU6)


def test_v3_norms_and_squeeze_excitation():
    model = meta_model("mobilenet_v3_large")
    norms = [m for m in model.modules() if isinstance(m, rt.nn.BatchNorm2d)]
    assert all(n.eps == 1e-3 and n.momentum == 0.01 for n in norms)
    block = model.features[4]  # 24 -> 40, expanded 72, kernel 5, SE, ReLU
    se = block.block[2]
    assert se.fc1.weight.shape == (24, 72, 1, 1)  # make_divisible(72 // 4, 8) = 24
    assert isinstance(se.scale_activation, rt.nn.Hardsigmoid)
    assert isinstance(block.block[0][2], rt.nn.ReLU)
    assert isinstance(model.features[7].block[0][2], rt.nn.Hardswish)
    assert model.classifier[0].weight.shape == (1280, 960)


def test_v3_small_tail():
    model = meta_model("mobilenet_v3_small")
    assert model.features[-1][0].weight.shape == (576, 96, 1, 1)
    assert model.classifier[3].weight.shape == (1000, 1024)


def test_unknown_v3_arch_is_refused():
    with pytest.raises(ValueError, match="mobilenet_v3_large"):
        mobilenet_v3("mobilenet_v3_medium")
