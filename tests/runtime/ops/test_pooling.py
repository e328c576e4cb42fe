"""Pooling: forward and backward against direct (one output position at a time) numpy
references, gradients by finite differences, FLOPs by COUNTING.md, and PyTorch (float32)."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import flopcount.runtime as rt
from flopcount.runtime.ops.pooling import (AdaptiveAvgPoolBackward, AdaptiveMaxPoolBackward, AvgPoolBackward,
                                           MaxPool, MaxPoolBackward)
from opcheck import (Example, check_op, forward_backward_with_torch, linear_adjoint, op_costs, randn, record,
                     run_example)

F = rt.nn.functional


def _n(v, nd):
    return (v,) * nd if isinstance(v, int) else tuple(v)


def _out(n, k, s, p, d, ceil_mode):
    span = d * (k - 1) + 1
    if ceil_mode:
        o = -(-(n + 2 * p - span) // s) + 1
        return o - 1 if (o - 1) * s >= n + p else o
    return (n + 2 * p - span) // s + 1


def _max_windows(x, kernel, stride, padding, dilation=1, ceil_mode=False):
    """Yield (output position, list of in-bounds input positions of its window)."""
    nd = x.ndim - 2
    kernel, stride, padding, dilation = (_n(v, nd) for v in (kernel, stride, padding, dilation))
    out = tuple(_out(x.shape[2 + i], kernel[i], stride[i], padding[i], dilation[i], ceil_mode) for i in range(nd))
    for o in np.ndindex(*out):
        cells = []
        for k in np.ndindex(*kernel):
            at = tuple(oi * s - p + ki * d for oi, ki, s, p, d in zip(o, k, stride, padding, dilation))
            if all(0 <= a < n for a, n in zip(at, x.shape[2:])):
                cells.append(at)
        yield out, o, cells


def ref_max_pool(x, kernel_size, stride, padding=0, dilation=1, ceil_mode=False):
    y = None
    for out, o, cells in _max_windows(x, kernel_size, stride, padding, dilation, ceil_mode):
        if y is None:
            y = np.zeros(x.shape[:2] + out)
        y[(slice(None), slice(None)) + o] = np.max([x[(slice(None), slice(None)) + c] for c in cells], axis=0)
    return y


def ref_max_pool_backward(g, x, kernel, stride, padding=0, dilation=1, ceil_mode=False):
    gx = np.zeros_like(x)
    for _, o, cells in _max_windows(x, kernel, stride, padding, dilation, ceil_mode):
        for n in range(x.shape[0]):
            for c in range(x.shape[1]):
                best = max(cells, key=lambda at: x[(n, c) + at])  # first maximum in scan order
                gx[(n, c) + best] += g[(n, c) + o]
    return gx


def ref_avg_pool(x, kernel_size, stride, padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None):
    """Sum of the in-bounds window elements over PyTorch's divisor."""
    nd = x.ndim - 2
    kernel, stride, padding = _n(kernel_size, nd), _n(stride, nd), _n(padding, nd)
    out = tuple(_out(x.shape[2 + i], kernel[i], stride[i], padding[i], 1, ceil_mode) for i in range(nd))
    y = np.zeros(x.shape[:2] + out)
    for o in np.ndindex(*out):
        start = [oi * s - p for oi, s, p in zip(o, stride, padding)]
        end = [min(a + k, n + p) for a, k, n, p in zip(start, kernel, x.shape[2:], padding)]
        padded_count = np.prod([e - a for a, e in zip(start, end)])
        lo = [max(a, 0) for a in start]
        hi = [min(e, n) for e, n in zip(end, x.shape[2:])]
        window = x[(slice(None), slice(None)) + tuple(slice(a, b) for a, b in zip(lo, hi))]
        divisor = divisor_override or (padded_count if count_include_pad else np.prod([b - a for a, b in zip(lo, hi)]))
        y[(slice(None), slice(None)) + o] = window.sum(axis=tuple(range(2, 2 + nd))) / divisor
    return y


def _adaptive_windows(size, out):
    for o in np.ndindex(*out):
        yield o, tuple(slice((i * n) // m, -((-(i + 1) * n) // m)) for i, n, m in zip(o, size, out))


def ref_adaptive(x, out, reduce):
    nd = x.ndim - 2
    y = np.zeros(x.shape[:2] + tuple(out))
    for o, window in _adaptive_windows(x.shape[2:], out):
        y[(slice(None), slice(None)) + o] = reduce(x[(slice(None), slice(None)) + window], axis=tuple(range(2, 2 + nd)))
    return y


def ref_adaptive_max_backward(g, x):
    gx = np.zeros_like(x)
    for o, window in _adaptive_windows(x.shape[2:], g.shape[2:]):
        for n in range(x.shape[0]):
            for c in range(x.shape[1]):
                patch = x[(n, c) + window]
                at = np.unravel_index(np.argmax(patch), patch.shape)
                gx[(n, c) + tuple(w.start + a for w, a in zip(window, at))] += g[(n, c) + o]
    return gx


_MAX = dict(kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), dilation=(1, 1), ceil_mode=False)
_AVG = dict(kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), ceil_mode=True, count_include_pad=False,
            divisor_override=None)

EXAMPLES = {
    # out (2, 3, 3, 3): 8 comparisons per 3x3 window
    "max_pool": Example(lambda x: F.max_pool2d(x, 3, 2, 1), [randn(2, 3, 6, 6)],
                        lambda x: ref_max_pool(x, 3, 2, 1), macs=0, flops=2 * 3 * 3 * 3 * (9 - 1)),
    # the forward's comparisons again, plus one add per output gradient
    "max_pool_backward": Example(
        lambda g, x: rt.apply(MaxPoolBackward, g, x, **_MAX), [randn(2, 3, 3, 3, seed=1), randn(2, 3, 6, 6)],
        lambda g, x: ref_max_pool_backward(g, x, 3, 2, 1), grad=False,
        flops=2 * 3 * 3 * 3 * (9 - 1) + 2 * 3 * 3 * 3),
    # ceil_mode: (6 + 2 - 3) / 2 rounds up to 3, so out (2, 3, 4, 4); numel(out)·prod(K)
    "avg_pool": Example(lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False),
                        [randn(2, 3, 6, 6)],
                        lambda x: ref_avg_pool(x, 3, 2, 1, ceil_mode=True, count_include_pad=False),
                        macs=0, flops=2 * 3 * 4 * 4 * 9),
    # one divide per output gradient, then 9 adds
    "avg_pool_backward": Example(
        lambda g: rt.apply(AvgPoolBackward, g, input_size=(6, 6), **_AVG), [randn(2, 3, 4, 4, seed=1)],
        lambda g: linear_adjoint(lambda x: ref_avg_pool(x, 3, 2, 1, True, False), (2, 3, 6, 6), g),
        flops=2 * 3 * 4 * 4 * (9 + 1)),
    # numel(in) + numel(out)
    "adaptive_avg_pool": Example(lambda x: F.adaptive_avg_pool2d(x, (3, 4)), [randn(2, 3, 5, 7)],
                                 lambda x: ref_adaptive(x, (3, 4), np.mean), flops=2 * 3 * 5 * 7 + 2 * 3 * 3 * 4),
    "adaptive_avg_pool_backward": Example(
        lambda g: rt.apply(AdaptiveAvgPoolBackward, g, input_size=(5, 7)), [randn(2, 3, 3, 4, seed=1)],
        lambda g: linear_adjoint(lambda x: ref_adaptive(x, (3, 4), np.mean), (2, 3, 5, 7), g),
        flops=2 * 3 * 5 * 7 + 2 * 3 * 3 * 4),
    # windows along 5 -> 3 have 2, 3, 2 elements and along 7 -> 4 have 2, 3, 3, 2: 7·10 elements in
    # the 12 windows of each (n, c), so 70 − 12 comparisons each
    "adaptive_max_pool": Example(lambda x: F.adaptive_max_pool2d(x, (3, 4)), [randn(2, 3, 5, 7)],
                                 lambda x: ref_adaptive(x, (3, 4), np.max), flops=2 * 3 * (7 * 10 - 12)),
    "adaptive_max_pool_backward": Example(
        lambda g, x: rt.apply(AdaptiveMaxPoolBackward, g, x), [randn(2, 3, 3, 4, seed=1), randn(2, 3, 5, 7)],
        ref_adaptive_max_backward, grad=False, flops=2 * 3 * (7 * 10 - 12) + 2 * 3 * 3 * 4),
}


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example(name):
    run_example(name, EXAMPLES[name])


MAX_CASES = [
    ((2, 2, 9), 1, dict(kernel_size=3, stride=2, padding=1, dilation=2)),
    ((1, 2, 7, 6), 2, dict(kernel_size=(2, 3), stride=(2, 1), ceil_mode=True)),
    ((1, 2, 8, 8), 2, dict(kernel_size=2)),                                   # stride defaults to kernel
    ((1, 1, 5, 5, 6), 3, dict(kernel_size=2, stride=2, padding=1, ceil_mode=True)),
    ((2, 7, 7), 2, dict(kernel_size=3, stride=2)),                            # unbatched (C, H, W)
]


@pytest.mark.parametrize("xs,nd,kw", MAX_CASES)
def test_max_pool_variants(xs, nd, kw):
    fn = getattr(F, f"max_pool{nd}d")
    ref_kw = dict(kw)
    ref_kw.setdefault("stride", kw["kernel_size"])

    def reference(x):
        if x.ndim == nd + 1:
            return ref_max_pool(x[None], **ref_kw)[0]
        return ref_max_pool(x, **ref_kw)
    check_op(lambda x: fn(x, **kw), [randn(*xs)], reference)


AVG_CASES = [
    ((2, 2, 9), 1, dict(kernel_size=3, stride=2, padding=1, count_include_pad=True)),
    ((2, 2, 9), 1, dict(kernel_size=4, stride=3, padding=2, ceil_mode=True, count_include_pad=False)),
    ((1, 2, 7, 6), 2, dict(kernel_size=(3, 2), stride=(2, 2), padding=(1, 1), ceil_mode=True)),
    ((1, 2, 5, 5), 2, dict(kernel_size=3, stride=2, padding=1, divisor_override=4)),
    ((1, 1, 4, 5, 6), 3, dict(kernel_size=2, stride=(1, 2, 2), padding=1, count_include_pad=False)),
]


@pytest.mark.parametrize("xs,nd,kw", AVG_CASES)
def test_avg_pool_variants(xs, nd, kw):
    ref_kw = dict(kw)
    ref_kw.setdefault("stride", kw["kernel_size"])
    check_op(lambda x: getattr(F, f"avg_pool{nd}d")(x, **kw), [randn(*xs)], lambda x: ref_avg_pool(x, **ref_kw))


@pytest.mark.parametrize("xs,out", [((1, 2, 7), 3), ((1, 2, 3), 5), ((1, 2, 6, 4), (None, 3)),
                                    ((1, 2, 4, 3, 5), (2, 3, 2)), ((1, 2, 2, 3), (4, 5)),
                                    ((2, 3, 5, 5), 1), ((1, 2, 6, 4), (3, 2))])  # windows that tile
def test_adaptive_variants_including_output_larger_than_input(xs, out):
    nd = len(xs) - 2
    sizes = tuple(n if o is None else o for n, o in zip(xs[2:], _n(out, nd)))
    for kind, reduce in (("avg", np.mean), ("max", np.max)):
        fn = getattr(F, f"adaptive_{kind}_pool{nd}d")
        check_op(lambda x: fn(x, out), [randn(*xs)], lambda x: ref_adaptive(x, sizes, reduce))


@settings(max_examples=30, deadline=None)
@given(nd=st.integers(1, 3), data=st.data())
def test_random_pools_match_the_references(nd, data):
    kernel = tuple(data.draw(st.integers(1, 3)) for _ in range(nd))
    stride = tuple(data.draw(st.integers(1, 3)) for _ in range(nd))
    dilation = tuple(data.draw(st.integers(1, 2)) for _ in range(nd))
    padding = tuple(data.draw(st.integers(0, k // 2)) for k in kernel)
    size = tuple(data.draw(st.integers(d * (k - 1) + 1, 6)) for k, d in zip(kernel, dilation))
    ceil_mode = data.draw(st.booleans())
    x = randn(2, 2, *size)
    y = getattr(F, f"max_pool{nd}d")(rt.tensor(x), kernel, stride, padding, dilation, ceil_mode)
    np.testing.assert_allclose(y.numpy(), ref_max_pool(x, kernel, stride, padding, dilation, ceil_mode))
    include = data.draw(st.booleans())
    y = getattr(F, f"avg_pool{nd}d")(rt.tensor(x), kernel, stride, padding, ceil_mode, include)
    np.testing.assert_allclose(y.numpy(), ref_avg_pool(x, kernel, stride, padding, ceil_mode, include), rtol=1e-12)


def test_max_pool_gradient_goes_to_the_first_maximum_of_a_tie():
    x = rt.tensor([[[1.0, 5.0, 5.0, 2.0]]], requires_grad=True)
    F.max_pool1d(x, 3, stride=1).sum().backward()
    assert x.grad.tolist() == [[[0.0, 2.0, 0.0, 0.0]]]


def test_nan_propagates_through_max_pool():
    y = F.max_pool1d(rt.tensor([[[1.0, float("nan"), 3.0, 4.0]]]), 2)
    assert np.isnan(y.numpy()[0, 0, 0]) and y.numpy()[0, 0, 1] == 4.0


def test_integer_max_pool_pads_with_the_lowest_integer():
    x = rt.tensor(np.array([[[-5, -7, -9]]], dtype=np.int64))
    assert F.max_pool1d(x, 2, stride=2, padding=1).tolist() == [[[-5, -7]]]


def test_backward_costs_are_observed_in_the_backward_phase():
    x = rt.randn(1, 2, 6, 6, requires_grad=True)
    _, events = record(lambda: F.max_pool2d(x, 2).sum().backward())
    back = [e for e in events if e.phase == "backward" and e.op.name == "max_pool_backward"]
    assert len(back) == 1 and back[0].cost.flops == 2 * 3 * 3 * (4 - 1) + 2 * 3 * 3


def test_global_average_pool_costs():
    x = rt.randn(2, 8, 7, 7)
    cost = op_costs(lambda: F.adaptive_avg_pool2d(x, 1))["adaptive_avg_pool"]
    assert cost.flops == 2 * 8 * 49 + 2 * 8 and cost.macs == 0
    assert cost.bytes_read == 4 * 2 * 8 * 49 and cost.bytes_written == 4 * 2 * 8


def test_meta_pool_shapes():
    x = rt.randn(1, 64, 112, 112).to("meta")
    assert F.max_pool2d(x, 3, 2, 1).shape == (1, 64, 56, 56)
    assert F.avg_pool2d(x, 2, ceil_mode=True).shape == (1, 64, 56, 56)
    assert F.adaptive_avg_pool2d(x, (7, None)).shape == (1, 64, 7, 112)


def test_bad_inputs_are_named():
    with pytest.raises(rt.ShapeError, match=r"max_pool: padding \(2, 2\) should be at most half of kernel_size \(3, 3\)"):
        F.max_pool2d(rt.ones(1, 1, 8, 8), 3, padding=2)
    with pytest.raises(rt.ShapeError, match=r"max_pool: input \(1, 1, 2, 2\) is too small for kernel_size \(3, 3\)"):
        F.max_pool2d(rt.ones(1, 1, 2, 2), 3)
    with pytest.raises(rt.ShapeError, match=r"avg_pool2d: expected a 3-d \(unbatched\) or 4-d"):
        F.avg_pool2d(rt.ones(4, 4), 2)
    with pytest.raises(rt.ShapeError, match=r"adaptive_avg_pool2d: output_size needs 1 or 2 values"):
        F.adaptive_avg_pool2d(rt.ones(1, 1, 4, 4), (1, 2, 3))
    with pytest.raises(rt.UnsupportedOpError, match="max_pool2d: return_indices=True is not supported"):
        F.max_pool2d(rt.ones(1, 1, 4, 4), 2, return_indices=True)
    with pytest.raises(rt.UnsupportedOpError, match="adaptive_max_pool2d: return_indices"):
        F.adaptive_max_pool2d(rt.ones(1, 1, 4, 4), 2, return_indices=True)


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_matches_torch_forward_and_backward(nd):
    torch = pytest.importorskip("torch")
    tf = torch.nn.functional
    rng = np.random.default_rng(nd)
    x = rng.standard_normal((2, 3) + (7,) * nd).astype(np.float32)
    cases = [
        ("max_pool", dict(kernel_size=3, stride=2, padding=1, dilation=1, ceil_mode=True)),
        ("max_pool", dict(kernel_size=2, stride=1, padding=1, dilation=2)),
        ("avg_pool", dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False)),
        ("avg_pool", dict(kernel_size=2, stride=3, padding=1)),
        ("adaptive_avg_pool", dict(output_size=3)),
        ("adaptive_max_pool", dict(output_size=5)),
    ]
    if nd > 1:
        cases.append(("avg_pool", dict(kernel_size=3, stride=2, padding=1, divisor_override=5)))
    for name, kw in cases:
        fn = f"{name}{nd}d"
        (y, ty), (gx, tgx) = forward_backward_with_torch(lambda a: getattr(F, fn)(a, **kw),
                                                         lambda a: getattr(tf, fn)(a, **kw), [x], rng)
        np.testing.assert_allclose(y, ty, rtol=1e-5, atol=1e-6, err_msg=f"{name} {kw}")
        np.testing.assert_allclose(gx, tgx, rtol=1e-5, atol=1e-6, err_msg=f"{name} {kw}")


@pytest.mark.parametrize("block_bytes", [1, 3 * 7 * 7 * 4, 10**9], ids=["one-plane", "three-planes", "whole"])
def test_max_pool_by_blocks_of_planes_equals_the_reference(monkeypatch, block_bytes):
    """The CPU kernels run on blocks of planes; any block size gives the reference's maximum and
    the gradient at the first maximum, ties (zeros after a ReLU) and NaN included."""
    from flopcount.runtime.ops import pooling

    monkeypatch.setattr(pooling, "BLOCK_BYTES", block_bytes)
    x = np.maximum(randn(2, 5, 7, 7, seed=7), 0)  # half zeros: many ties in a window
    g = randn(2, 5, 4, 4, seed=8)
    y = rt.apply(MaxPool, rt.tensor(x), **_MAX).numpy()
    np.testing.assert_array_equal(y, ref_max_pool(x, 3, 2, 1))
    gx = rt.apply(MaxPoolBackward, rt.tensor(g), rt.tensor(x), **_MAX).numpy()
    np.testing.assert_allclose(gx, ref_max_pool_backward(g, x, 3, 2, 1), rtol=1e-12, atol=1e-12)
    x[1, 2, 3, 3] = np.nan  # a NaN wins its windows, and takes their gradients
    y = rt.apply(MaxPool, rt.tensor(x), **_MAX).numpy()
    np.testing.assert_array_equal(np.isnan(y), np.isnan(ref_max_pool(x, 3, 2, 1)))
    gx = rt.apply(MaxPoolBackward, rt.tensor(g), rt.tensor(x), **_MAX).numpy()
    assert gx[1, 2, 3, 3] == pytest.approx(g[1, 2, 1:3, 1:3].sum())
