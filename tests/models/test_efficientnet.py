"""EfficientNet-B0: torchvision's layout, counts, init, stage table and stochastic depth."""

import math

import pytest
from vision_checks import ClassifierTests, assert_constant, assert_normal_std, assert_uniform_bound, fan_out

import flopcount.runtime as rt
from flopcount.models.efficientnet import MBConvConfig


class TestEfficientNet(ClassifierTests):
    PUBLISHED_PARAMS = {"efficientnet_b0": 5_288_548}
    PUBLISHED_GMACS = {"efficientnet_b0": 0.386}

    def test_torchvision_init(self, name, eager):
        model, _ = eager
        expand, depthwise = model.features[7][0].block[0][0], model.features[6][1].block[1][0]
        for conv in (expand, depthwise, model.features[8][0]):  # big enough for a tight spread
            assert_normal_std(conv.weight, math.sqrt(2 / fan_out(conv.weight)))
        se = model.features[6][3].block[2]
        assert_constant(se.fc1.bias, 0)
        for norm in (m for m in model.modules() if isinstance(m, rt.nn.BatchNorm2d)):
            assert_constant(norm.weight, 1)
            assert_constant(norm.bias, 0)
        fc = model.classifier[1]
        assert_uniform_bound(fc.weight, 1 / math.sqrt(fc.out_features))
        assert_constant(fc.bias, 0)

    def test_stage_table(self, name, eager):
        model, _ = eager
        assert [len(model.features[i]) for i in range(1, 8)] == [1, 2, 2, 3, 3, 4, 1]
        # stage 1 has expand ratio 1: no expansion conv, so depthwise, SE, projection
        assert len(model.features[1][0].block) == 3
        assert model.features[3][0].block[1][0].weight.shape == (144, 1, 5, 5)  # 24 * 6, kernel 5
        # squeeze width is a quarter of the block's input width
        assert model.features[5][0].block[2].fc1.weight.shape == (80 // 4, 480, 1, 1)
        assert model.features[8][0].weight.shape == (1280, 320, 1, 1)

    def test_stochastic_depth_grows_linearly(self, name, eager):
        model, _ = eager
        blocks = [b for i in range(1, 8) for b in model.features[i]]
        assert [b.stochastic_depth.p for b in blocks] == pytest.approx([0.2 * k / 16 for k in range(16)])
        assert [b.use_res_connect for b in blocks[:4]] == [False, False, True, False]


def test_config_scaling_rounds_widths_to_eight_and_depth_up():
    cnf = MBConvConfig(6, 5, 2, 40, 80, 3).scaled(width_mult=1.1, depth_mult=1.2)
    assert (cnf.input_channels, cnf.out_channels, cnf.num_layers) == (48, 88, 4)
