"""Ops on the GPU against PyTorch on the same weights (PyTorch's CUDA build when it has one,
its CPU otherwise), forward and input gradients, float32 within 1e-4 relative."""


import numpy as np
import pytest

import flopcount.runtime as rt

torch = pytest.importorskip("torch")
TF = torch.nn.functional
F = rt.nn.functional
TDEV = "cuda" if torch.cuda.is_available() else "cpu"
# PyTorch lets cuDNN convolutions use TF32 by default (10-bit mantissa: 1e-3 relative error on
# an H100), which a float32 comparison at 1e-4 cannot tell from a wrong kernel; CuPy uses none
torch.backends.cudnn.allow_tf32 = False
torch.backends.cuda.matmul.allow_tf32 = False


def _pair(*arrays):
    """(CUDA tensors, torch tensors) of float32 arrays, both requiring gradients."""
    ours = [rt.tensor(a.astype(np.float32), device="cuda", requires_grad=True) for a in arrays]
    theirs = [torch.tensor(a.astype(np.float32), device=TDEV, requires_grad=True) for a in arrays]
    return ours, theirs


def _check(ours_fn, theirs_fn, *arrays, rtol=1e-4, atol=1e-5):
    ours, theirs = _pair(*arrays)
    a, b = ours_fn(*ours), theirs_fn(*theirs)
    w = np.random.default_rng(5).standard_normal(tuple(b.shape)).astype(np.float32)
    (a * rt.tensor(w, device="cuda")).sum().backward()
    (b * torch.tensor(w, device=TDEV)).sum().backward()
    scale = max(1.0, float(b.detach().abs().max()))
    np.testing.assert_allclose(a.numpy(), b.detach().cpu().numpy(), rtol=rtol, atol=atol * scale)
    for k, (x, y) in enumerate(zip(ours, theirs)):
        gscale = max(1.0, float(y.grad.abs().max()))
        np.testing.assert_allclose(x.grad.numpy(), y.grad.cpu().numpy(), rtol=rtol, atol=atol * gscale,
                                   err_msg=f"gradient {k}")


R = np.random.default_rng(0)


def rn(*shape):
    return R.standard_normal(shape)


@pytest.mark.parametrize("kw", [dict(stride=1, padding=1), dict(stride=2, padding=0, dilation=2),
                                dict(stride=2, padding=1, groups=2), dict(stride=1, padding=0)])
def test_conv2d(kw):
    g = kw.get("groups", 1)
    w = rn(8, 6 // g, 3, 3) if kw.get("padding", 0) or kw.get("stride", 1) > 1 else rn(8, 6 // g, 1, 1)
    _check(lambda x, w, b: F.conv2d(x, w, b, **kw), lambda x, w, b: TF.conv2d(x, w, b, **kw),
           rn(2, 6, 11, 9), w, rn(8))


def test_depthwise_and_3d_and_1d_convs():
    _check(lambda x, w: F.conv2d(x, w, stride=2, padding=1, groups=6),
           lambda x, w: TF.conv2d(x, w, stride=2, padding=1, groups=6), rn(2, 6, 10, 10), rn(12, 1, 3, 3))
    _check(lambda x, w: F.conv3d(x, w, padding=1), lambda x, w: TF.conv3d(x, w, padding=1),
           rn(1, 3, 5, 6, 4), rn(4, 3, 3, 3, 3))
    _check(lambda x, w: F.conv1d(x, w, stride=3, dilation=2), lambda x, w: TF.conv1d(x, w, stride=3, dilation=2),
           rn(2, 4, 30), rn(5, 4, 3))


@pytest.mark.parametrize("kw", [dict(stride=2, padding=1, output_padding=1), dict(stride=1, padding=0, groups=2),
                                dict(stride=3, padding=2, dilation=2)])
def test_conv_transpose2d(kw):
    g = kw.get("groups", 1)
    _check(lambda x, w, b: F.conv_transpose2d(x, w, b, **kw), lambda x, w, b: TF.conv_transpose2d(x, w, b, **kw),
           rn(2, 4, 7, 6), rn(4, 6 // g, 3, 3), rn(6))


@pytest.mark.parametrize("kw", [dict(kernel_size=3, stride=2, padding=1), dict(kernel_size=2),
                                dict(kernel_size=3, stride=2, ceil_mode=True), dict(kernel_size=3, stride=1, dilation=2)])
def test_max_pool2d(kw):
    _check(lambda x: F.max_pool2d(x, **kw), lambda x: TF.max_pool2d(x, **kw), rn(2, 3, 13, 12))


@pytest.mark.parametrize("dim", [-1, 1])
def test_softmax_and_log_softmax(dim):
    _check(lambda x: F.softmax(x, dim), lambda x: TF.softmax(x, dim), rn(3, 70, 1500) * 4)
    _check(lambda x: F.log_softmax(x, dim), lambda x: TF.log_softmax(x, dim), rn(3, 70, 1500) * 4)


def test_layer_norm_and_rms_norm():
    _check(lambda x, w, b: F.layer_norm(x, (768,), w, b), lambda x, w, b: TF.layer_norm(x, (768,), w, b),
           rn(4, 9, 768), rn(768), rn(768))
    if hasattr(TF, "rms_norm"):
        _check(lambda x, w: F.rms_norm(x, (4096,), w, 1e-6), lambda x, w: TF.rms_norm(x, (4096,), w, 1e-6),
               rn(3, 4096), rn(4096))


@pytest.mark.parametrize("name,kw", [("gelu", {}), ("gelu", {"approximate": "tanh"}), ("silu", {}), ("mish", {}),
                                     ("hardswish", {}), ("hardsigmoid", {}), ("elu", {"alpha": 0.5}),
                                     ("leaky_relu", {"negative_slope": 0.2}), ("softplus", {"beta": 2.0})])
def test_activations(name, kw):
    _check(lambda x: getattr(F, name)(x, **kw), lambda x: getattr(TF, name)(x, **kw), rn(4, 1000) * 4)


@pytest.mark.parametrize("case", ["plain", "causal", "bool_mask", "float_mask", "gqa"])
def test_scaled_dot_product_attention(case):
    q, k, v = rn(2, 4, 33, 16), rn(2, 4, 47, 16), rn(2, 4, 47, 8)
    kw, mask = {}, None
    if case == "causal":
        k, v = rn(2, 4, 33, 16), rn(2, 4, 33, 8)
        kw["is_causal"] = True
    if case == "gqa":
        if "enable_gqa" not in TF.scaled_dot_product_attention.__doc__:
            pytest.skip("this PyTorch has no enable_gqa")
        k, v = rn(2, 2, 47, 16), rn(2, 2, 47, 8)
        kw["enable_gqa"] = True
    if case == "bool_mask":
        mask = R.standard_normal((33, 47)) > -0.5
    if case == "float_mask":
        mask = rn(4, 1, 47)
    if mask is None:
        _check(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, **kw),
               lambda q, k, v: TF.scaled_dot_product_attention(q, k, v, **kw), q, k, v)
        return
    ours_mask = rt.tensor(mask if mask.dtype == bool else mask.astype(np.float32), device="cuda")
    their_mask = torch.tensor(mask if mask.dtype == bool else mask.astype(np.float32), device=TDEV)
    _check(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, ours_mask),
           lambda q, k, v: TF.scaled_dot_product_attention(q, k, v, their_mask), q, k, v)


def test_linear_and_embedding():
    _check(lambda x, w, b: F.linear(x, w, b), lambda x, w, b: TF.linear(x, w, b), rn(3, 5, 64), rn(32, 64), rn(32))
    ids = R.integers(0, 100, (4, 9))
    _check(lambda w: F.embedding(rt.tensor(ids, device="cuda"), w),
           lambda w: TF.embedding(torch.tensor(ids, device=TDEV), w), rn(100, 16))
    with pytest.raises(IndexError, match="embedding: ids must lie in"):
        F.embedding(rt.tensor([0, 100], device="cuda"), rt.zeros(100, 4, device="cuda"))
