"""ShuffleNet V2 x0.5 and x1.0: torchvision's layout, counts, init, and the channel shuffle."""

import math

import numpy as np
from vision_checks import ClassifierTests, assert_uniform_bound, fan_in

import flopcount.runtime as rt
from flopcount.models.shufflenet import InvertedResidual, channel_shuffle


class TestShuffleNetV2(ClassifierTests):
    PUBLISHED_PARAMS = {"shufflenet_v2_x0_5": 1_366_792, "shufflenet_v2_x1_0": 2_278_604}
    PUBLISHED_GMACS = {"shufflenet_v2_x0_5": 0.04, "shufflenet_v2_x1_0": 0.145}

    def test_default_layer_init(self, name, eager):
        # torchvision leaves ShuffleNet V2 to the layers' own init: U(±1/sqrt(fan_in))
        model, _ = eager
        for conv in (model.conv1[0], model.stage3[0].branch2[0], model.conv5[0]):
            assert_uniform_bound(conv.weight, 1 / math.sqrt(fan_in(conv.weight)))
        assert_uniform_bound(model.fc.weight, 1 / math.sqrt(model.fc.in_features))

    def test_stage_widths(self, name, eager):
        model, _ = eager
        widths = {"shufflenet_v2_x0_5": (48, 96, 192), "shufflenet_v2_x1_0": (116, 232, 464)}[name]
        for stage, width, units in zip((model.stage2, model.stage3, model.stage4), widths, (4, 8, 4)):
            assert len(stage) == units
            assert stage[0].branch1[2].weight.shape == (width // 2, stage[0].branch1[0].weight.shape[0], 1, 1)
            assert stage[-1].branch2[5].weight.shape == (width // 2, width // 2, 1, 1)


def test_channel_shuffle_interleaves_the_two_halves():
    x = np.arange(2 * 6 * 2 * 2, dtype=np.float32).reshape(2, 6, 2, 2)
    out = channel_shuffle(rt.tensor(x), 2).numpy()
    # channels (a0 a1 a2 | b0 b1 b2) -> (a0 b0 a1 b1 a2 b2)
    np.testing.assert_array_equal(out, x[:, [0, 3, 1, 4, 2, 5]])


def test_stride_one_unit_passes_half_the_channels_through():
    unit = InvertedResidual(8, 8, 1).eval()
    x = rt.randn(1, 8, 5, 5)
    with rt.no_grad():
        out = unit(x).numpy()
    # the first half goes through untouched and lands on the even channels after the shuffle
    np.testing.assert_array_equal(out[:, 0::2], x.numpy()[:, :4])
    assert len(unit.branch1) == 0


def test_stride_two_unit_halves_the_resolution():
    unit = InvertedResidual(24, 48, 2).eval()
    with rt.no_grad():
        assert unit(rt.randn(2, 24, 9, 9)).shape == (2, 48, 5, 5)
