"""RegNetY-1.6GF and RegNetX-16GF: torchvision's layout, counts, init and derived stage widths."""

import math

import pytest
from vision_checks import ClassifierTests, assert_constant, assert_normal_std, meta_model

import flopcount.runtime as rt
from flopcount.models.regnet import BlockParams


class TestRegNet(ClassifierTests):
    PUBLISHED_PARAMS = {"regnet_y_1_6gf": 11_202_430, "regnet_x_16gf": 54_278_536}
    PUBLISHED_GMACS = {"regnet_y_1_6gf": 1.612, "regnet_x_16gf": 15.941}

    def test_torchvision_init(self, name, eager):
        model, _ = eager
        block = model.trunk_output.block3.get_submodule("block3-0")
        for conv in (block.f.a[0], block.f.b[0], block.proj[0]):
            k = conv.kernel_size
            assert_normal_std(conv.weight, math.sqrt(2.0 / (k[0] * k[1] * conv.out_channels)))
        for norm in (m for m in model.modules() if isinstance(m, rt.nn.BatchNorm2d)):
            assert_constant(norm.weight, 1)
            assert_constant(norm.bias, 0)
        assert_normal_std(model.fc.weight, 0.01)
        assert_constant(model.fc.bias, 0)


# The stage tables of the RegNet paper (Radosavovic et al. 2020, appendix) for these two models.
@pytest.mark.parametrize("config, depths, widths, group_width", [
    (dict(depth=27, w_0=48, w_a=20.71, w_m=2.65, group_width=24), [2, 6, 17, 2], [48, 120, 336, 888], 24),
    (dict(depth=22, w_0=216, w_a=55.59, w_m=2.1, group_width=128), [2, 6, 13, 1], [256, 512, 896, 2048], 128),
])
def test_stage_settings_from_design_space(config, depths, widths, group_width):
    params = BlockParams.from_init_params(**config)
    assert params.depths == depths
    assert params.widths == widths
    assert params.group_widths == [group_width] * 4
    assert params.strides == [2, 2, 2, 2]


def test_group_width_shrinks_to_a_narrow_stage():
    # a stage narrower than the group width becomes one group of its own width
    params = BlockParams.from_init_params(depth=3, w_0=16, w_a=8.0, w_m=2.0, group_width=64)
    assert all(g == w for g, w in zip(params.group_widths, params.widths))


def test_invalid_design_space_is_refused():
    with pytest.raises(ValueError, match="w_0"):
        BlockParams.from_init_params(depth=10, w_0=20, w_a=8.0, w_m=2.0, group_width=8)


def test_y_blocks_have_squeeze_excitation_sized_by_block_input():
    model = meta_model("regnet_y_1_6gf")
    first = model.trunk_output.block2.get_submodule("block2-0")
    # input width 48 (stage 1), squeeze = round(0.25 * 48) = 12; the SE acts on the 120 wide bottleneck
    assert first.f.se.fc1.weight.shape == (12, 120, 1, 1)
    assert first.f.b[0].groups == 120 // 24
    assert not hasattr(meta_model("regnet_x_16gf").trunk_output.block1.get_submodule("block1-0").f, "se")
