"""Pooling and upsampling layers: PyTorch's arguments, defaults and repr; outputs against
hand-computed values and against PyTorch (forward and backward)."""

import numpy as np
import pytest

import flopcount.runtime as rt
from flopcount.runtime import nn
from opcheck import forward_backward_with_torch


def test_repr_and_defaults_like_pytorch():
    assert repr(nn.MaxPool2d(3, 2, 1)) == "MaxPool2d(kernel_size=3, stride=2, padding=1, dilation=1, ceil_mode=False)"
    assert repr(nn.MaxPool1d(2)) == "MaxPool1d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)"
    assert repr(nn.AvgPool1d(3)) == "AvgPool1d(kernel_size=(3,), stride=(3,), padding=(0,))"
    assert repr(nn.AvgPool2d(3, 2)) == "AvgPool2d(kernel_size=3, stride=2, padding=0)"
    assert repr(nn.AvgPool3d((1, 2, 2))) == "AvgPool3d(kernel_size=(1, 2, 2), stride=(1, 2, 2), padding=0)"
    assert repr(nn.AdaptiveAvgPool2d((1, 1))) == "AdaptiveAvgPool2d(output_size=(1, 1))"
    assert repr(nn.AdaptiveMaxPool1d(4)) == "AdaptiveMaxPool1d(output_size=4)"
    assert repr(nn.Upsample(scale_factor=2, mode="bilinear")) == "Upsample(scale_factor=2.0, mode='bilinear')"
    assert repr(nn.UpsamplingNearest2d(size=(4, 5))) == "UpsamplingNearest2d(size=(4, 5), mode='nearest')"
    up = nn.UpsamplingBilinear2d(scale_factor=2)
    assert repr(up) == "UpsamplingBilinear2d(scale_factor=2.0, mode='bilinear')" and up.align_corners is True
    for layer in (nn.MaxPool2d(2), nn.AvgPool2d(2), nn.AdaptiveAvgPool2d(1), nn.Upsample(scale_factor=2)):
        assert list(layer.parameters()) == [] and layer.state_dict() == {}


def test_hand_computed_outputs():
    x = rt.tensor([[[[1.0, 2.0, 3.0, 4.0],
                     [5.0, 6.0, 7.0, 8.0],
                     [9.0, 10.0, 11.0, 12.0],
                     [13.0, 14.0, 15.0, 16.0]]]])
    assert nn.MaxPool2d(2)(x).tolist() == [[[[6.0, 8.0], [14.0, 16.0]]]]
    assert nn.AvgPool2d(2)(x).tolist() == [[[[3.5, 5.5], [11.5, 13.5]]]]
    # padding 1 with count_include_pad: the corner window holds 1 real element of 4
    assert nn.AvgPool2d(2, padding=1)(x).tolist()[0][0][0] == [0.25, 1.25, 1.0]
    assert nn.AvgPool2d(2, padding=1, count_include_pad=False)(x).tolist()[0][0][0] == [1.0, 2.5, 4.0]
    assert nn.AdaptiveAvgPool2d(1)(x).tolist() == [[[[8.5]]]]
    # windows of 4 -> 3: [0, 2), [1, 3), [2, 4)
    assert nn.AdaptiveMaxPool2d((1, 3))(x).tolist() == [[[[14.0, 15.0, 16.0]]]]
    assert nn.Upsample(scale_factor=2)(x).shape == (1, 1, 8, 8)
    assert nn.UpsamplingBilinear2d(size=(4, 7))(x).tolist()[0][0][0] == [1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0]


def test_layers_in_a_meta_model():
    model = nn.Sequential(nn.MaxPool2d(3, 2, 1), nn.AvgPool2d(2, ceil_mode=True), nn.Upsample(scale_factor=3),
                          nn.AdaptiveAvgPool2d((5, None)))
    assert model(rt.randn(2, 8, 33, 33).to("meta")).shape == (2, 8, 5, 27)


def test_return_indices_is_refused_with_a_clear_error():
    with pytest.raises(rt.UnsupportedOpError, match="return_indices=True is not supported"):
        nn.MaxPool2d(2, return_indices=True)(rt.randn(1, 1, 4, 4))


LAYERS = [
    ("MaxPool1d", (3,), dict(stride=2, padding=1, ceil_mode=True), 1),
    ("MaxPool2d", (3, 2, 1), {}, 2),
    ("MaxPool3d", (2,), dict(dilation=2), 3),
    ("AvgPool1d", (3,), dict(stride=2, padding=1, count_include_pad=False), 1),
    ("AvgPool2d", (3, 2, 1), dict(ceil_mode=True, divisor_override=7), 2),
    ("AvgPool3d", (2,), dict(stride=1), 3),
    ("AdaptiveAvgPool1d", (3,), {}, 1),
    ("AdaptiveAvgPool2d", ((2, None),), {}, 2),
    ("AdaptiveAvgPool3d", (3,), {}, 3),
    ("AdaptiveMaxPool1d", (4,), {}, 1),
    ("AdaptiveMaxPool2d", ((3, 2),), {}, 2),
    ("AdaptiveMaxPool3d", (2,), {}, 3),
    ("Upsample", (), dict(scale_factor=2, mode="nearest"), 2),
    ("Upsample", (), dict(size=(9, 5), mode="bilinear", align_corners=False), 2),
    ("Upsample", (), dict(scale_factor=1.5, mode="trilinear", align_corners=True), 3),
    ("UpsamplingNearest2d", (), dict(size=(11, 4)), 2),
    ("UpsamplingBilinear2d", (), dict(scale_factor=2), 2),
]


@pytest.mark.parametrize("name,args,kw,nd", LAYERS)
def test_matches_torch(name, args, kw, nd):
    torch = pytest.importorskip("torch")
    theirs = getattr(torch.nn, name)(*args, **kw)
    ours = getattr(nn, name)(*args, **kw)
    assert repr(ours) == repr(theirs)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3) + (6,) * nd).astype(np.float32)
    (y, ty), (gx, tgx) = forward_backward_with_torch(ours, theirs, [x], rng)
    np.testing.assert_allclose(y, ty, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(gx, tgx, rtol=1e-5, atol=1e-5)
