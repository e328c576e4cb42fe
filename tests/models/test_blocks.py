"""The zoo's shared blocks: torchvision's rounding, child layout, SE, stochastic depth, MLP, Permute."""

import numpy as np
import pytest

import flopcount.runtime as rt
from flopcount.models._blocks import (MLP, Conv2dNormActivation, Permute, SqueezeExcitation, StochasticDepth,
                                      make_divisible, stochastic_depth)
from flopcount.runtime import nn


@pytest.mark.parametrize("value, divisor, expected", [
    (32, 8, 32), (36, 8, 40), (35, 8, 32), (35.9, 8, 40), (12, 8, 16), (4, 8, 8), (18, 8, 24), (100, 16, 96),
])
def test_make_divisible(value, divisor, expected):
    # nearest multiple, at least the divisor, and never more than 10% below the value
    assert make_divisible(value, divisor) == expected


def test_conv_norm_activation_children_and_defaults():
    block = Conv2dNormActivation(8, 16, kernel_size=5, stride=2, dilation=2)
    conv, norm, act = block
    assert (isinstance(conv, nn.Conv2d), isinstance(norm, nn.BatchNorm2d), isinstance(act, nn.ReLU)) == (True,) * 3
    assert conv.padding == (4, 4)  # (k - 1) // 2 * dilation keeps the size at stride 1
    assert conv.bias is None       # a norm follows: no conv bias
    assert [k for k in block.state_dict()][:2] == ["0.weight", "1.weight"]
    bare = Conv2dNormActivation(8, 16, kernel_size=(1, 3), norm_layer=None, activation_layer=None)
    assert len(bare) == 1 and bare[0].padding == (0, 1) and bare[0].bias is not None


def test_squeeze_excitation_scales_channels():
    se = SqueezeExcitation(4, 2)
    x = np.random.default_rng(0).standard_normal((2, 4, 3, 3)).astype(np.float32)
    w1, b1 = se.fc1.weight.numpy()[:, :, 0, 0], se.fc1.bias.numpy()
    w2, b2 = se.fc2.weight.numpy()[:, :, 0, 0], se.fc2.bias.numpy()
    pooled = x.mean(axis=(2, 3))
    scale = 1 / (1 + np.exp(-(np.maximum(pooled @ w1.T + b1, 0) @ w2.T + b2)))
    np.testing.assert_allclose(se(rt.tensor(x)).numpy(), x * scale[:, :, None, None], rtol=1e-5, atol=1e-6)


def test_stochastic_depth_drops_whole_rows_and_rescales_the_rest():
    rt.manual_seed(3)
    x = rt.ones(400, 3, 2)
    out = stochastic_depth(x, 0.25, "row", training=True).numpy()
    rows = out.reshape(400, -1)
    assert set(np.unique(rows)) <= {0.0, np.float32(1 / 0.75)}
    assert (rows == rows[:, :1]).all()            # one draw per sample
    assert 0.15 < (rows[:, 0] == 0).mean() < 0.35  # about p of them dropped
    batch = stochastic_depth(x, 0.5, "batch", training=True).numpy()
    assert len(np.unique(batch)) == 1             # one draw for the whole batch


def test_stochastic_depth_is_identity_outside_training():
    x = rt.randn(2, 3)
    layer = StochasticDepth(0.5, "row").eval()
    assert layer(x) is x
    assert stochastic_depth(x, 0.0, "row", training=True) is x
    with pytest.raises(ValueError, match="mode"):
        stochastic_depth(x, 0.5, "column")
    with pytest.raises(ValueError, match="probability"):
        stochastic_depth(x, 1.5, "row")


def test_mlp_layout():
    mlp = MLP(8, [16, 4], norm_layer=nn.LayerNorm, activation_layer=nn.GELU, dropout=0.1)
    assert [type(m).__name__ for m in mlp] == ["Linear", "LayerNorm", "GELU", "Dropout", "Linear", "Dropout"]
    assert mlp(rt.randn(3, 8)).shape == (3, 4)


def test_permute_is_a_view():
    assert Permute([0, 2, 3, 1])(rt.empty(2, 3, 4, 5, device="meta")).shape == (2, 4, 5, 3)
