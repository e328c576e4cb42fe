"""The index arithmetic and reduction order of the raw kernels, run by their numpy mirrors:
im2col/col2im against the CPU convolution's windows, the block reductions against plain
reductions, the attention mask offsets against numpy broadcasting."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from flopcount.runtime.cuda.kernels import _source, attention, conv, pooling, rowwise
from flopcount.runtime.ops import _window


@st.composite
def windows(draw):
    nd = draw(st.integers(1, 3))
    kernel = tuple(draw(st.integers(1, 3)) for _ in range(nd))
    stride = tuple(draw(st.integers(1, 3)) for _ in range(nd))
    dilation = tuple(draw(st.integers(1, 2)) for _ in range(nd))
    padding = tuple(draw(st.integers(0, k // 2 + 1)) for k in kernel)
    size = tuple(draw(st.integers(d * (k - 1) + 1, d * (k - 1) + 5)) for k, d in zip(kernel, dilation))
    return size, kernel, stride, padding, dilation


@settings(max_examples=60, deadline=None)
@given(windows(), st.integers(1, 3), st.integers(1, 3))
def test_im2col_reference_matches_the_cpu_columns(geo, n, c):
    size, kernel, stride, padding, dilation = geo
    out = tuple(_window.out_size(*a) for a in zip(size, kernel, stride, padding, dilation))
    x = np.random.default_rng(0).standard_normal((n, c) + size)
    want = _window.im2col(np, x, kernel, out, stride, padding, dilation)     # (N, C, *K, *O)
    got = conv.im2col_reference(x, kernel, out, stride, padding, dilation)  # (C·K, N·P)
    want = want.reshape(n, c * np.prod(kernel), -1).transpose(1, 0, 2).reshape(got.shape)
    np.testing.assert_array_equal(got, want)


@settings(max_examples=60, deadline=None)
@given(windows(), st.integers(1, 3), st.integers(1, 3))
def test_col2im_reference_is_the_adjoint_of_im2col(geo, n, c):
    size, kernel, stride, padding, dilation = geo
    out = tuple(_window.out_size(*a) for a in zip(size, kernel, stride, padding, dilation))
    rng = np.random.default_rng(1)
    cols = rng.standard_normal((c * int(np.prod(kernel)), n * int(np.prod(out))))
    x = rng.standard_normal((n, c) + size)
    # <im2col(x), cols> == <x, col2im(cols)>
    lhs = np.sum(conv.im2col_reference(x, kernel, out, stride, padding, dilation) * cols)
    back = conv.col2im_reference(cols, n, c, size, kernel, out, stride, padding, dilation)
    np.testing.assert_allclose(lhs, np.sum(x * back), rtol=1e-10)
    # and the CPU's col2im on the same columns, in its (N, C, *K, *I) layout
    cpu_cols = cols.reshape((c,) + kernel + (n,) + out)
    cpu_cols = np.moveaxis(cpu_cols, len(kernel) + 1, 0)
    np.testing.assert_allclose(back, _window.col2im(np, cpu_cols, size, stride, padding, dilation), atol=1e-12)


def test_gather_index_inverts_source_index():
    q = np.arange(12)
    for k in range(3):
        i, ok = conv.gather_index(q, k, stride=2, padding=1, dilation=2, inp=5)
        assert np.array_equal(conv.source_index(i[ok], k, 2, 1, 2), q[ok])
        t = q + 1 - 2 * k
        assert np.array_equal(ok, (t >= 0) & (t % 2 == 0) & (t // 2 < 5))


def test_geometry_pads_to_three_dims():
    g = conv.geometry((7,), (3,), (5,), (1,), (0,), (1,))
    assert g == (1, 1, 7, 1, 1, 3, 1, 1, 5, 1, 1, 1, 0, 0, 0, 1, 1, 1)
    assert conv.chunks(10, 100, budget=350) == [(0, 3), (3, 6), (6, 9), (9, 10)]
    assert conv.chunks(2, 10**12, budget=1) == [(0, 1), (1, 2)]


@pytest.mark.parametrize("cols", [1, 31, 32, 33, 1000, 1025, 5000])
def test_block_reductions_give_the_row_totals(cols):
    rows = np.random.default_rng(cols).standard_normal((3, cols)) - 10  # all negative: max identity matters
    block = _source.block_size(cols)
    assert block % 32 == 0 and 32 <= block <= 1024
    s = _source.block_reduce_reference(_source.thread_partials(rows, block, np.sum, 0.0), np.add, 0.0)
    m = _source.block_reduce_reference(_source.thread_partials(rows, block, np.max, -np.inf),
                                       _source.max_nan_reference, -np.inf)
    np.testing.assert_allclose(s, rows.sum(axis=1), rtol=1e-12)
    np.testing.assert_array_equal(m, rows.max(axis=1))


def test_block_max_lets_nan_win():
    rows = np.array([[1.0, np.nan, 3.0] + [0.0] * 70])
    partials = _source.thread_partials(rows, 64, np.max, -np.inf)
    assert np.isnan(_source.block_reduce_reference(partials, _source.max_nan_reference, -np.inf)[0])


@pytest.mark.parametrize("shape,dim", [((2, 3, 40), 2), ((2, 37, 5), 1), ((1300,), 0), ((4, 1), 0)])
def test_softmax_reference(shape, dim):
    x = np.random.default_rng(0).standard_normal(shape) * 3
    e = np.exp(x - x.max(axis=dim, keepdims=True))
    want = e / e.sum(axis=dim, keepdims=True)
    np.testing.assert_allclose(rowwise.softmax_reference(x, dim), want, rtol=1e-12)
    np.testing.assert_allclose(rowwise.softmax_reference(x, dim, log=True), np.log(want), rtol=1e-10, atol=1e-12)
    half = rowwise.softmax_reference(x.astype(np.float16), dim)
    assert half.dtype == np.float16
    np.testing.assert_allclose(half, want, atol=2e-3)


def test_row_layout():
    assert rowwise.row_layout((2, 3, 4, 5), 1) == (2, 3, 20)
    assert rowwise.row_layout((7,), 0) == (1, 7, 1)


def test_norm_reference():
    rng = np.random.default_rng(0)
    x, w, b = rng.standard_normal((3, 4, 50)), rng.standard_normal((4, 50)), rng.standard_normal((4, 50))
    mean = x.mean(axis=(1, 2), keepdims=True)
    var = x.var(axis=(1, 2), keepdims=True)
    np.testing.assert_allclose(rowwise.norm_reference(x, w, b, (4, 50), 1e-5, True),
                               (x - mean) / np.sqrt(var + 1e-5) * w + b, rtol=1e-10)
    ms = (x * x).mean(axis=2, keepdims=True)
    np.testing.assert_allclose(rowwise.norm_reference(x, w[0], None, (50,), 1e-6, False),
                               x / np.sqrt(ms + 1e-6) * w[0], rtol=1e-10)


@pytest.mark.parametrize("mask_shape", [(5, 7), (1, 7), (3, 1, 1, 7), (3, 4, 5, 7), (4, 5, 1), ()])
def test_mask_offsets_address_the_broadcast_mask(mask_shape):
    scores = (3, 4, 5, 7)
    mask = np.arange(int(np.prod(mask_shape))).reshape(mask_shape)
    offsets, col = attention.mask_offsets(np, mask.shape, scores)
    got = mask.reshape(-1)[offsets[:, None] + np.arange(7)[None, :] * col]
    np.testing.assert_array_equal(got, np.broadcast_to(mask, scores).reshape(-1, 7))


def test_scale_mask_softmax_reference_masks_rows_safely():
    s = np.random.default_rng(0).standard_normal((1, 3, 4)).astype(np.float32)
    mask = np.array([[True, False, True, True], [False] * 4, [True] * 4])
    offsets, col = attention.mask_offsets(np, mask.shape, s.shape)
    p = attention.scale_mask_softmax_reference(s, mask, offsets, col, np.float32(0.5), causal=False)
    assert np.all(p[0, 1] == 0)              # a fully masked row is zeros, not NaN
    assert p[0, 0, 1] == 0 and np.isclose(p[0, 0].sum(), 1)
    causal = attention.scale_mask_softmax_reference(s, None, None, 0, np.float32(1.0), causal=True)
    assert np.all(np.triu(causal[0], 1) == 0) and np.allclose(causal[0].sum(axis=1), 1)


def test_window_max_reference_picks_the_first_maximum_and_skips_padding():
    x = np.array([[[-np.inf, 3.0, 3.0, 1.0]]])
    best, arg = pooling.window_max_reference(x, (2,), (3,), (2,), (1,), (1,))
    # windows: [pad, -inf], [3, 3], [1, pad]; padding reads as -inf and a tie keeps the first
    np.testing.assert_array_equal(best[0, 0], [-np.inf, 3.0, 1.0])
    np.testing.assert_array_equal(arg[0, 0], [-1, 1, 3])
