"""Convolutions: forward against a direct (loop over output positions) numpy reference, gradients
by finite differences, MACs/FLOPs by COUNTING.md's formulas, and PyTorch on the same weights."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import flopcount.runtime as rt
from flopcount.runtime.ops.conv import ConvTransposeWeightGrad, ConvWeightGrad
from opcheck import (Example, check_op, forward_backward_with_torch, linear_adjoint, op_costs, randn, record,
                     run_example)

F = rt.nn.functional


def _n(v, nd):
    return (v,) * nd if isinstance(v, int) else tuple(v)


def ref_conv(x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
    """y[n, co, o] = sum over the group's channels ci and kernel positions k of
    w[co, ci, k] · xpad[n, ci, o·stride + k·dilation], computed one output position at a time."""
    nd = w.ndim - 2
    stride, padding, dilation = _n(stride, nd), _n(padding, nd), _n(dilation, nd)
    xpad = np.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in padding])
    n, c = x.shape[:2]
    cout, cg = w.shape[:2]
    og = cout // groups
    out = tuple((xpad.shape[2 + i] - dilation[i] * (w.shape[2 + i] - 1) - 1) // stride[i] + 1 for i in range(nd))
    y = np.zeros((n, cout) + out)
    for o in np.ndindex(*out):
        for k in np.ndindex(*w.shape[2:]):
            at = tuple(oi * s + ki * d for oi, ki, s, d in zip(o, k, stride, dilation))
            patch = xpad[(slice(None), slice(None)) + at]
            for gi in range(groups):
                wk = w[(slice(gi * og, (gi + 1) * og), slice(None)) + k]
                y[(slice(None), slice(gi * og, (gi + 1) * og)) + o] += patch[:, gi * cg:(gi + 1) * cg] @ wk.T
    if b is not None:
        y += b.reshape((cout,) + (1,) * nd)
    return y


def ref_conv_transpose(x, w, b=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """Every input element x[n, ci, i] adds x · w[ci, co, k] at output i·stride + k·dilation
    (before cropping ``padding`` on both sides)."""
    nd = w.ndim - 2
    stride, padding, dilation = _n(stride, nd), _n(padding, nd), _n(dilation, nd)
    output_padding = _n(output_padding, nd)
    n, cin = x.shape[:2]
    og = w.shape[1]
    cg = cin // groups
    inp, kernel = x.shape[2:], w.shape[2:]
    full = tuple((i - 1) * s + d * (k - 1) + op + 1
                 for i, k, s, d, op in zip(inp, kernel, stride, dilation, output_padding))
    y = np.zeros((n, og * groups) + full)
    for i in np.ndindex(*inp):
        for k in np.ndindex(*kernel):
            at = tuple(ii * s + kk * d for ii, kk, s, d in zip(i, k, stride, dilation))
            for gi in range(groups):
                xs = x[(slice(None), slice(gi * cg, (gi + 1) * cg)) + i]
                y[(slice(None), slice(gi * og, (gi + 1) * og)) + at] += xs @ w[(slice(gi * cg, (gi + 1) * cg), slice(None)) + k]
    y = y[(slice(None), slice(None)) + tuple(slice(p, f - p) for p, f in zip(padding, full))]
    if b is not None:
        y += b.reshape((-1,) + (1,) * nd)
    return y


def conv_weight_grad(x, g, **attrs):
    return rt.apply(ConvWeightGrad, x, g, **attrs)


def conv_transpose_weight_grad(x, g, **attrs):
    return rt.apply(ConvTransposeWeightGrad, x, g, **attrs)


_WG = dict(kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), dilation=(1, 1), groups=2)
_TWG = dict(kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), output_padding=(1, 1), dilation=(1, 1), groups=2)

EXAMPLES = {
    # out (2, 6, 3, 3): MACs N·Cout·prod(O)·(Cin/g)·prod(K); FLOPs 2·MACs + numel(out) for the bias
    "conv": Example(lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1, groups=2),
                    [randn(2, 4, 5, 5), randn(6, 2, 3, 3, seed=1), randn(6, seed=2)],
                    lambda x, w, b: ref_conv(x, w, b, stride=2, padding=1, groups=2),
                    macs=2 * 6 * 3 * 3 * 2 * 3 * 3, flops=2 * (2 * 6 * 3 * 3 * 2 * 3 * 3) + 2 * 6 * 3 * 3),
    # in (2, 4, 3, 3) -> out (2, 6, 6, 6): MACs N·Cin·prod(I)·(Cout/g)·prod(K)
    "conv_transpose": Example(
        lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1, groups=2),
        [randn(2, 4, 3, 3), randn(4, 3, 3, 3, seed=1), randn(6, seed=2)],
        lambda x, w, b: ref_conv_transpose(x, w, b, stride=2, padding=1, output_padding=1, groups=2),
        macs=2 * 4 * 3 * 3 * 3 * 3 * 3, flops=2 * (2 * 4 * 3 * 3 * 3 * 3 * 3) + 2 * 6 * 6 * 6),
    # the weight gradient of the "conv" example: the same MACs as that forward
    "conv_weight_grad": Example(
        lambda x, g: conv_weight_grad(x, g, **_WG), [randn(2, 4, 5, 5), randn(2, 6, 3, 3, seed=3)],
        lambda x, g: linear_adjoint(lambda w: ref_conv(x, w, stride=2, padding=1, groups=2), (6, 2, 3, 3), g),
        macs=2 * 6 * 3 * 3 * 2 * 3 * 3, flops=2 * (2 * 6 * 3 * 3 * 2 * 3 * 3)),
    # the weight gradient of the "conv_transpose" example: the same MACs as that forward
    "conv_transpose_weight_grad": Example(
        lambda x, g: conv_transpose_weight_grad(x, g, **_TWG), [randn(2, 4, 3, 3), randn(2, 6, 6, 6, seed=3)],
        lambda x, g: linear_adjoint(
            lambda w: ref_conv_transpose(x, w, stride=2, padding=1, output_padding=1, groups=2), (4, 3, 3, 3), g),
        macs=2 * 4 * 3 * 3 * 3 * 3 * 3, flops=2 * (2 * 4 * 3 * 3 * 3 * 3 * 3)),
}


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example(name):
    run_example(name, EXAMPLES[name])


CONV_CASES = [
    # (x shape, w shape, kwargs)
    ((2, 2, 9), (3, 2, 3), dict(stride=2, padding=1, dilation=2)),
    ((1, 2, 6, 7), (2, 2, 3, 2), dict(stride=(1, 2), padding=(1, 0), dilation=(2, 1))),
    ((1, 3, 5, 5), (6, 1, 3, 3), dict(padding=1, groups=3)),            # depthwise, multiplier 2
    ((2, 3, 6, 6), (3, 1, 3, 3), dict(stride=2, padding=1, groups=3)),  # strided depthwise
    ((2, 4, 3, 3), (5, 4, 1, 1), dict()),                               # 1x1: a plain matmul
    ((1, 4, 5, 5), (2, 4, 1, 1), dict(stride=2)),                        # strided 1x1
    ((2, 4, 7, 5, 3), (6, 2, 1, 1, 1), dict(stride=(3, 2, 1), dilation=2, groups=2)),  # its pixels, grouped
    ((1, 2, 8, 8), (2, 2, 3, 3), dict(stride=3, padding=2)),             # stride > kernel gaps
    ((1, 2, 9, 9), (2, 2, 3, 3), dict(stride=2, dilation=2)),            # dilation: phases skip
    ((1, 2, 4, 4, 4), (2, 2, 2, 2, 2), dict(stride=2, padding=1)),
    ((1, 2, 5, 6), (2, 2, 4, 3), dict(padding="same")),                  # odd total: extra pad right
    ((1, 2, 5, 6), (2, 2, 3, 3), dict(padding="valid", dilation=2)),
]


@pytest.mark.parametrize("xs,ws,kw", CONV_CASES)
def test_conv_variants_against_direct_reference(xs, ws, kw):
    nd = len(ws) - 2
    fn = getattr(F, f"conv{nd}d")
    ref_kw = dict(kw)
    if kw.get("padding") == "valid":
        ref_kw["padding"] = 0
    if kw.get("padding") == "same":
        ref_kw["padding"] = 0
        totals = [(k - 1) * _n(kw.get("dilation", 1), nd)[i] for i, k in enumerate(ws[2:])]

        def reference(x, w):
            pads = [(0, 0), (0, 0)] + [(t // 2, t - t // 2) for t in totals]
            return ref_conv(np.pad(x, pads), w, **ref_kw)
    else:
        def reference(x, w):
            return ref_conv(x, w, **ref_kw)
    check_op(lambda x, w: fn(x, w, **kw), [randn(*xs), randn(*ws, seed=1)], reference)


TRANSPOSE_CASES = [
    ((2, 2, 4), (2, 3, 3), dict(stride=3, padding=1, output_padding=2)),
    ((1, 2, 3, 4), (2, 2, 2, 3), dict(stride=(2, 1), padding=(0, 1), dilation=(1, 2))),
    # output_padding 1 >= stride 1 (allowed because dilation is 2): the input gradient is cropped
    ((1, 2, 3, 3), (2, 1, 2, 2), dict(dilation=2, output_padding=1)),
    ((1, 4, 3, 3), (4, 1, 3, 3), dict(stride=2, groups=4)),
    ((2, 3, 3, 3), (3, 2, 1, 1), dict()),
    ((1, 2, 2, 2, 2), (2, 1, 2, 2, 2), dict(stride=2, padding=1, output_padding=1)),
]


@pytest.mark.parametrize("xs,ws,kw", TRANSPOSE_CASES)
def test_conv_transpose_variants_against_direct_reference(xs, ws, kw):
    nd = len(ws) - 2
    fn = getattr(F, f"conv_transpose{nd}d")
    check_op(lambda x, w: fn(x, w, **kw), [randn(*xs), randn(*ws, seed=1)],
             lambda x, w: ref_conv_transpose(x, w, **kw))


def test_unbatched_input_and_batch_chunks_match_one_image_at_a_time(monkeypatch):
    from flopcount.runtime.ops import _window

    monkeypatch.setattr(_window, "CHUNK_BYTES", 1)  # force one image per chunk
    x, w = randn(3, 2, 6, 6), randn(4, 2, 3, 3, seed=1)
    y = F.conv2d(rt.tensor(x), rt.tensor(w), padding=1).numpy()
    one = F.conv2d(rt.tensor(x[1]), rt.tensor(w), padding=1)
    assert one.shape == (4, 6, 6)
    np.testing.assert_allclose(y[1], one.numpy(), rtol=1e-6)
    np.testing.assert_allclose(y, ref_conv(x, w, padding=1), rtol=1e-6, atol=1e-9)
    check_op(lambda x, w: F.conv2d(x, w, padding=1), [x[:2, :, :4, :4], w])


@settings(max_examples=30, deadline=None)
@given(nd=st.integers(1, 3), n=st.integers(1, 2), groups=st.integers(1, 2), cg=st.integers(1, 2),
       og=st.integers(1, 2), data=st.data())
def test_random_convs_match_the_reference(nd, n, groups, cg, og, data):
    kernel = tuple(data.draw(st.integers(1, 3)) for _ in range(nd))
    stride = tuple(data.draw(st.integers(1, 3)) for _ in range(nd))
    dilation = tuple(data.draw(st.integers(1, 2)) for _ in range(nd))
    padding = tuple(data.draw(st.integers(0, 2)) for _ in range(nd))
    size = tuple(data.draw(st.integers(d * (k - 1) + 1, 6)) for k, d in zip(kernel, dilation))
    x, w = randn(n, cg * groups, *size), randn(og * groups, cg, *kernel, seed=1)
    y = getattr(F, f"conv{nd}d")(rt.tensor(x), rt.tensor(w), None, stride, padding, dilation, groups)
    np.testing.assert_allclose(y.numpy(), ref_conv(x, w, None, stride, padding, dilation, groups), rtol=1e-6, atol=1e-9)
    opad = tuple(data.draw(st.integers(0, max(s, d) - 1)) for s, d in zip(stride, dilation))
    wt = randn(cg * groups, og, *kernel, seed=2)
    out = [(i - 1) * s - 2 * p + d * (k - 1) + o + 1
           for i, s, p, d, k, o in zip(size, stride, padding, dilation, kernel, opad)]
    if min(out) > 0:
        yt = getattr(F, f"conv_transpose{nd}d")(rt.tensor(x), rt.tensor(wt), None, stride, padding, opad, groups, dilation)
        np.testing.assert_allclose(yt.numpy(), ref_conv_transpose(x, wt, None, stride, padding, opad, groups, dilation),
                                   rtol=1e-6, atol=1e-9)


def test_backward_macs_are_two_x_forward_and_one_x_for_a_first_layer():
    conv = rt.nn.Conv2d(3, 8, 3, stride=2, padding=1)
    x = rt.randn(2, 3, 9, 9)
    forward = 2 * 8 * 5 * 5 * 3 * 3 * 3

    def step():
        conv(x).sum().backward()

    _, events = record(step)
    assert sum(e.cost.macs for e in events if e.phase == "forward") == forward
    backward = {e.op.name: e.cost.macs for e in events if e.phase == "backward" and e.cost.macs}
    assert backward == {"conv_weight_grad": forward}  # the input needs no gradient

    x.requires_grad_(True)
    _, events = record(step)
    backward = {e.op.name: e.cost.macs for e in events if e.phase == "backward" and e.cost.macs}
    assert backward == {"conv_weight_grad": forward, "conv_transpose": forward}
    assert "sum" in {e.op.name for e in events if e.phase == "backward"}  # the bias gradient


def test_transposed_conv_backward_is_a_conv_and_its_weight_grad():
    x = rt.randn(1, 4, 5, 5, requires_grad=True)
    w = rt.randn(4, 2, 3, 3, requires_grad=True)
    forward = 1 * 4 * 5 * 5 * 2 * 3 * 3
    _, events = record(lambda: F.conv_transpose2d(x, w, stride=2).sum().backward())
    backward = {e.op.name: e.cost.macs for e in events if e.phase == "backward" and e.cost.macs}
    assert backward == {"conv": forward, "conv_transpose_weight_grad": forward}


def test_cost_bytes_count_inputs_weights_and_output():
    x, w, b = rt.randn(1, 2, 4, 4), rt.randn(3, 2, 3, 3), rt.randn(3)
    cost = op_costs(lambda: F.conv2d(x, w, b))["conv"]
    assert cost.bytes_read == 4 * (1 * 2 * 4 * 4 + 3 * 2 * 3 * 3 + 3)
    assert cost.bytes_written == 4 * (1 * 3 * 2 * 2)


def test_meta_conv_shapes_without_data():
    x = rt.randn(2, 16, 32, 32).to("meta")
    w = rt.randn(32, 16, 3, 3).to("meta")
    y = F.conv2d(x, w, stride=2, padding=1)
    assert y.device.type == "meta" and y.shape == (2, 32, 16, 16)
    t = F.conv_transpose2d(y, rt.randn(32, 8, 4, 4).to("meta"), stride=2, padding=1)
    assert t.shape == (2, 8, 32, 32)


def test_bad_inputs_name_the_op_and_shapes():
    with pytest.raises(rt.ShapeError, match=r"conv: input \(1, 3, 8, 8\) has 3 channels, but weight \(4, 2, 3, 3\)"):
        F.conv2d(rt.ones(1, 3, 8, 8), rt.ones(4, 2, 3, 3))
    with pytest.raises(rt.ShapeError, match=r"conv: input \(1, 2, 2, 2\) is too small for weight \(4, 2, 3, 3\)"):
        F.conv2d(rt.ones(1, 2, 2, 2), rt.ones(4, 2, 3, 3))
    with pytest.raises(rt.ShapeError, match=r"conv: bias \(3,\) does not fit weight \(4, 2, 3, 3\)"):
        F.conv2d(rt.ones(1, 2, 5, 5), rt.ones(4, 2, 3, 3), rt.ones(3))
    with pytest.raises(rt.ShapeError, match="groups=3"):
        F.conv2d(rt.ones(1, 6, 5, 5), rt.ones(4, 2, 3, 3), groups=3)
    with pytest.raises(rt.ShapeError, match="not supported for strided"):
        F.conv2d(rt.ones(1, 2, 5, 5), rt.ones(4, 2, 3, 3), stride=2, padding="same")
    with pytest.raises(rt.ShapeError, match=r"conv2d: expected a 3-d \(unbatched\) or 4-d"):
        F.conv2d(rt.ones(5, 5), rt.ones(4, 2, 3, 3))
    with pytest.raises(rt.ShapeError, match=r"conv_transpose: output_padding \(2, 2\) must be smaller"):
        F.conv_transpose2d(rt.ones(1, 2, 3, 3), rt.ones(2, 2, 3, 3), stride=2, output_padding=2)
    with pytest.raises(rt.ShapeError, match="same floating dtype"):
        F.conv2d(rt.ones(1, 2, 5, 5), rt.ones(4, 2, 3, 3, dtype=rt.float64))


# --- PyTorch on the same weights (float32) -------------------------------------------------------

def _torch_case(rng, nd, transposed):
    groups = int(rng.integers(1, 3))
    cg, og = int(rng.integers(1, 4)), int(rng.integers(1, 3))
    kernel = tuple(int(v) for v in rng.integers(1, 4, nd))
    stride = tuple(int(v) for v in rng.integers(1, 3, nd))
    dilation = tuple(int(v) for v in rng.integers(1, 3, nd))
    padding = tuple(int(v) for v in rng.integers(0, 2, nd))
    size = tuple(int(v) for v in rng.integers(6, 9, nd))
    x = rng.standard_normal((2, cg * groups) + size).astype(np.float32)
    wshape = (cg * groups, og) if transposed else (og * groups, cg)
    w = rng.standard_normal(wshape + kernel).astype(np.float32)
    b = rng.standard_normal(og * groups).astype(np.float32)
    kw = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
    if transposed:
        kw["output_padding"] = tuple(int(rng.integers(0, s)) for s in stride)
    return x, w, b, kw


@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("nd", [1, 2, 3])
def test_matches_torch_forward_and_backward(nd, transposed):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(nd + 10 * transposed)
    name = f"conv_transpose{nd}d" if transposed else f"conv{nd}d"
    for _ in range(4):
        x, w, b, kw = _torch_case(rng, nd, transposed)
        pairs = forward_backward_with_torch(lambda *a: getattr(F, name)(*a, **kw),
                                            lambda *a: getattr(torch.nn.functional, name)(*a, **kw), [x, w, b], rng)
        for ours, ref in pairs:  # output, then the gradients of x, w and b
            np.testing.assert_allclose(ours, ref, rtol=1e-5, atol=1e-5 * np.abs(ref).max())


@pytest.mark.parametrize("nd,kernel,padding", [(1, 3, 0), (2, 3, 1), (2, 5, 4), (3, 2, 1), (2, (3, 1), (2, 0))])
def test_stride_one_transposed_conv_as_a_flipped_conv(nd, kernel, padding):
    """At stride 1 the transposed conv runs as a conv with the flipped kernel: the same values
    as the direct reference, with and without bias, and the same input gradient of a conv."""
    rng = np.random.default_rng(nd)
    k = (kernel,) * nd if isinstance(kernel, int) else kernel
    p = (padding,) * nd if isinstance(padding, int) else padding
    x = rng.standard_normal((2, 3) + (6,) * nd)
    w = rng.standard_normal((3, 4) + k)
    b = rng.standard_normal(4)
    fn = getattr(F, f"conv_transpose{nd}d")
    y = fn(rt.tensor(x), rt.tensor(w), rt.tensor(b), 1, p).numpy()
    np.testing.assert_allclose(y, ref_conv_transpose(x, w, b, 1, p), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("stride,padding,size", [(1, 1, 16), (2, 1, 32), (1, 0, 18), (2, 2, 30)])
def test_weight_gradient_by_kernel_position_equals_the_sum_of_products(stride, padding, size):
    """From 16 input channels, on maps the wide grid serves, the weight gradient is one GEMM
    per image and kernel position (no column buffer): gw[o, c, a, b] is the sum over images
    and outputs of g[n, o, i, j]·x[n, c, i·s + a − p, j·s + b − p]."""
    from flopcount.runtime.ops import _conv_kernels

    c = _conv_kernels.DIRECT_WEIGHT_GRAD_CHANNELS
    rng = np.random.default_rng(stride + padding)
    x = rng.standard_normal((2, c, size, size))
    out = (size + 2 * padding - 3) // stride + 1
    assert _conv_kernels._flat((3, 3), (out, out), (stride,) * 2, (padding,) * 2, (1, 1), (size, size)) is not None
    assert out * out > _conv_kernels.SMALL_MAP  # not the whole-batch layout of small maps
    g = rng.standard_normal((2, 5, out, out))
    attrs = dict(kernel_size=(3, 3), stride=(stride,) * 2, padding=(padding,) * 2, dilation=(1, 1), groups=1)
    got = conv_weight_grad(rt.tensor(x), rt.tensor(g), **attrs).numpy()
    xp = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    span = stride * (out - 1) + 1
    expected = np.stack([np.stack([np.einsum("noij,ncij->oc", g, xp[:, :, a:a + span:stride, b:b + span:stride])
                                   for b in range(3)], -1) for a in range(3)], -2)
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-10)
