"""Conv1d/2d/3d and ConvTranspose1d/2d/3d: parameters, default init, repr, padding modes,
output_size, meta, argument errors, and PyTorch on the same weights (forward and backward)."""

import math

import numpy as np
import pytest

import flopcount.runtime as rt
from flopcount.runtime import nn
from opcheck import forward_backward_with_torch


@pytest.mark.parametrize("cls,args,kw,weight", [
    (nn.Conv1d, (4, 6, 3), {}, (6, 4, 3)),
    (nn.Conv2d, (4, 6, (3, 5)), dict(groups=2), (6, 2, 3, 5)),
    (nn.Conv3d, (2, 4, 2), {}, (4, 2, 2, 2, 2)),
    (nn.ConvTranspose1d, (4, 6, 3), dict(groups=2), (4, 3, 3)),
    (nn.ConvTranspose2d, (4, 6, 3), {}, (4, 6, 3, 3)),
    (nn.ConvTranspose3d, (2, 4, (1, 2, 3)), {}, (2, 4, 1, 2, 3)),
])
def test_parameter_names_and_shapes(cls, args, kw, weight):
    layer = cls(*args, **kw)
    assert [(n, p.shape) for n, p in layer.named_parameters()] == [("weight", weight), ("bias", (args[1],))]
    no_bias = cls(*args, **kw, bias=False)
    assert no_bias.bias is None and [n for n, _ in no_bias.named_parameters()] == ["weight"]


@pytest.mark.parametrize("layer", [nn.Conv2d(64, 32, 3), nn.ConvTranspose2d(32, 64, 3)])
def test_default_init_is_uniform_within_one_over_sqrt_fan_in(layer):
    # kaiming_uniform_(a=sqrt(5)) gives a bound gain·sqrt(3/fan_in) with gain sqrt(2/6): 1/sqrt(fan_in)
    fan_in = layer.weight.shape[1] * 9
    bound = 1 / math.sqrt(fan_in)
    w = layer.weight.numpy()
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.95 * bound
    assert abs(w.std() - bound / math.sqrt(3)) < 0.03 * bound
    b = layer.bias.numpy()
    assert np.abs(b).max() <= bound and b.std() > 0.3 * bound


def test_repr_like_pytorch():
    assert repr(nn.Conv2d(3, 16, 3, stride=2, padding=1)) == \
        "Conv2d(3, 16, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1))"
    assert repr(nn.Conv2d(4, 8, (3, 5), padding="same", dilation=2, groups=2, bias=False, padding_mode="reflect")) == \
        ("Conv2d(4, 8, kernel_size=(3, 5), stride=(1, 1), padding=same, dilation=(2, 2), groups=2, "
         "bias=False, padding_mode=reflect)")
    assert repr(nn.Conv1d(2, 2, 1)) == "Conv1d(2, 2, kernel_size=(1,), stride=(1,))"
    assert repr(nn.ConvTranspose2d(4, 6, 3, stride=2, output_padding=1, groups=2)) == \
        "ConvTranspose2d(4, 6, kernel_size=(3, 3), stride=(2, 2), output_padding=(1, 1), groups=2)"


@pytest.mark.parametrize("mode", ["zeros", "reflect", "replicate", "circular"])
def test_padding_modes_pad_then_convolve(mode):
    conv = nn.Conv2d(1, 1, 3, padding=(1, 2), padding_mode=mode, bias=False)
    x = np.arange(20, dtype=np.float32).reshape(1, 1, 4, 5)
    np_mode = {"zeros": "constant", "reflect": "reflect", "replicate": "edge", "circular": "wrap"}[mode]
    xpad = np.pad(x, [(0, 0), (0, 0), (1, 1), (2, 2)], mode=np_mode)
    w = conv.weight.numpy()[0, 0]
    expected = np.zeros((4, 7), dtype=np.float64)
    for i in range(4):
        for j in range(7):
            expected[i, j] = (xpad[0, 0, i:i + 3, j:j + 3] * w).sum()
    np.testing.assert_allclose(conv(rt.tensor(x)).numpy()[0, 0], expected, rtol=1e-5, atol=1e-5)


def test_same_padding_keeps_the_size_with_an_even_kernel():
    conv = nn.Conv2d(2, 3, (4, 3), padding="same", dilation=(1, 2))
    assert conv(rt.randn(1, 2, 7, 6)).shape == (1, 3, 7, 6)
    reflect = nn.Conv1d(2, 3, 4, padding="same", padding_mode="reflect")
    assert reflect(rt.randn(1, 2, 9)).shape == (1, 3, 9)


def test_conv_transpose_output_size_picks_output_padding():
    up = nn.ConvTranspose2d(2, 2, 3, stride=2, padding=1)
    x = rt.randn(1, 2, 5, 5)
    assert up(x).shape == (1, 2, 9, 9)
    assert up(x, output_size=(10, 10)).shape == (1, 2, 10, 10)
    assert up(x, output_size=[1, 2, 10, 9]).shape == (1, 2, 10, 9)
    with pytest.raises(ValueError, match="valid sizes range from 9 to 10"):
        up(x, output_size=(11, 11))


def test_unbatched_input():
    conv = nn.Conv2d(2, 4, 3)
    x = rt.randn(2, 6, 6)
    np.testing.assert_allclose(conv(x).numpy(), conv(x.unsqueeze(0)).numpy()[0], rtol=1e-6)


def test_meta_model_builds_without_data_and_gives_shapes():
    with rt.meta():
        conv = nn.Conv2d(256, 512, 3, stride=2, padding=1)
        up = nn.ConvTranspose2d(512, 256, 2, stride=2)
    assert conv.weight.data is None and conv.weight.device.type == "meta"
    y = conv(rt.randn(8, 256, 56, 56).to("meta"))
    assert y.shape == (8, 512, 28, 28)
    assert up(y).shape == (8, 256, 56, 56)


def test_bad_arguments_raise_like_pytorch():
    with pytest.raises(ValueError, match="in_channels must be divisible by groups"):
        nn.Conv2d(3, 4, 3, groups=2)
    with pytest.raises(ValueError, match="out_channels must be divisible by groups"):
        nn.Conv2d(4, 3, 3, groups=2)
    with pytest.raises(ValueError, match="groups must be a positive integer"):
        nn.Conv2d(4, 4, 3, groups=0)
    with pytest.raises(ValueError, match="padding='same' is not supported for strided convolutions"):
        nn.Conv2d(4, 4, 3, stride=2, padding="same")
    with pytest.raises(ValueError, match="Invalid padding string 'full'"):
        nn.Conv2d(4, 4, 3, padding="full")
    with pytest.raises(ValueError, match="padding_mode must be one of"):
        nn.Conv2d(4, 4, 3, padding_mode="mirror")
    with pytest.raises(ValueError, match='Only "zeros" padding mode is supported for ConvTranspose2d'):
        nn.ConvTranspose2d(4, 4, 3, padding_mode="reflect")
    with pytest.raises(rt.ShapeError, match=r"conv: input \(1, 3, 8, 8\) has 3 channels"):
        nn.Conv2d(4, 4, 3)(rt.randn(1, 3, 8, 8))


TORCH_LAYERS = [
    ("Conv1d", (3, 4, 3), dict(stride=2, padding=1)),
    ("Conv2d", (4, 6, 3), dict(padding=1, groups=2)),
    ("Conv2d", (3, 5, (3, 2)), dict(padding="same", padding_mode="reflect", dilation=(1, 2))),
    ("Conv2d", (3, 4, 3), dict(padding=2, padding_mode="circular", stride=2)),
    ("Conv2d", (4, 4, 3), dict(padding=1, padding_mode="replicate", groups=4, bias=False)),
    ("Conv3d", (2, 3, 2), dict(stride=(1, 2, 2), padding=1)),
    ("ConvTranspose1d", (3, 4, 3), dict(stride=2, padding=1, output_padding=1)),
    ("ConvTranspose2d", (4, 6, 3), dict(stride=2, groups=2, dilation=2)),
    ("ConvTranspose3d", (2, 3, 2), dict(stride=2)),
]


@pytest.mark.parametrize("name,args,kw", TORCH_LAYERS)
def test_matches_torch_with_its_state_dict(name, args, kw):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    theirs = getattr(torch.nn, name)(*args, **kw)
    ours = getattr(nn, name)(*args, **kw)
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    nd = int(name[-2])
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, args[0]) + (7,) * nd).astype(np.float32)
    pairs = forward_backward_with_torch(ours, theirs, [x], rng) + [
        (p.grad.numpy(), dict(theirs.named_parameters())[n].grad.numpy()) for n, p in ours.named_parameters()]
    for mine, ref in pairs:
        np.testing.assert_allclose(mine, ref, rtol=1e-5, atol=1e-5 * np.abs(ref).max())
