"""FlatWindows (kernel positions as contiguous ranges on a wide grid) against the per-position
views of ``windows`` and against ``scatter_windows``, and the kernels' scratch buffers never
leaking into results."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings, strategies as st

import flopcount.runtime as rt
from flopcount.runtime.ops._scratch import MAX_BYTES, scratch
from flopcount.runtime.ops._window import FlatWindows, out_size, positions, scatter_windows, windows
from flopcount.runtime.nn import functional as F


@st.composite
def geometries(draw):
    nd = draw(st.integers(1, 3))
    size = tuple(draw(st.integers(1, 8)) for _ in range(nd))
    kernel = tuple(draw(st.integers(1, 3)) for _ in range(nd))
    stride = tuple(draw(st.integers(1, 3)) for _ in range(nd))
    dilation = tuple(draw(st.integers(1, 2)) for _ in range(nd))
    padding = tuple(draw(st.integers(0, k // 2)) for k in kernel)
    out = tuple(out_size(n, k, s, p, d) for n, k, s, p, d in zip(size, kernel, stride, padding, dilation))
    if any(o <= 0 for o in out):
        out = None
    return size, kernel, stride, padding, dilation, out


@settings(max_examples=60, deadline=None)
@given(geometries())
def test_every_position_reads_what_windows_reads(geometry):
    size, kernel, stride, padding, dilation, out = geometry
    if out is None:
        return
    x = np.random.default_rng(0).standard_normal((2, 3) + size)
    fw = FlatWindows(kernel, out, stride, padding, dilation, size)
    planes = fw.gather(np, x, -7.0)
    for i, (_, view) in enumerate(windows(np, x, kernel, out, stride, padding, dilation, -7.0)):
        np.testing.assert_array_equal(fw.to_outputs(fw.view(planes, i)), view)


@settings(max_examples=60, deadline=None)
@given(geometries())
def test_scatter_equals_scatter_windows(geometry):
    size, kernel, stride, padding, dilation, out = geometry
    if out is None:
        return
    rng = np.random.default_rng(1)
    values = [rng.standard_normal((2, 3) + out) for _ in positions(kernel)]
    expected = scatter_windows(np, zip(positions(kernel), values), (2, 3), size, kernel, out, stride,
                               padding, dilation, np.float64)
    fw = FlatWindows(kernel, out, stride, padding, dilation, size,
                     extent=tuple(n + p for n, p in zip(size, padding)))
    acc = fw.zero_planes(np, (2, 3), np.float64)
    for i, v in enumerate(values):
        fw.view(acc, i)[...] += fw.from_outputs(np, v)  # the extra grid entries are zeros
    np.testing.assert_allclose(fw.scatter(np, acc, np.float64), expected, rtol=1e-12, atol=1e-12)


def test_a_3x3_conv_on_56_columns_has_short_extra_rows():
    fw = FlatWindows((3, 3), (56, 56), (1, 1), (1, 1), (1, 1), (56, 56))
    assert fw.grid == (56, 58) and fw.length == 56 * 58
    assert abs(fw.ratio() - 58 / 56) < 1e-12


def test_scratch_is_reused_per_role_and_large_requests_are_not_kept():
    a = scratch(np, "test-role", (4, 5), np.float32)
    b = scratch(np, "test-role", (20,), np.float32)
    assert np.shares_memory(a, b)
    assert not np.shares_memory(a, scratch(np, "test-other-role", (4, 5), np.float32))
    big = (MAX_BYTES // 4 + 1,)
    assert not np.shares_memory(scratch(np, "test-big", big, np.float32), scratch(np, "test-big", big, np.float32))


def test_results_never_alias_the_scratch_buffers():
    """Outputs of kernels that build on scratch buffers stay intact after later calls (a 1-d
    conv's wide grid has no extra entries, so its crop is the whole buffer)."""
    rng = np.random.default_rng(0)
    cases = [
        lambda x: F.conv1d(x, rt.tensor(rng.standard_normal((4, 3, 3)).astype(np.float32)), padding=1),
        lambda x: F.conv1d(x, rt.tensor(rng.standard_normal((3, 1, 3)).astype(np.float32)), groups=3),
        lambda x: F.max_pool1d(x, 2),
        lambda x: F.avg_pool1d(x, 2),
    ]
    for fn in cases:
        x1 = rt.tensor(rng.standard_normal((2, 3, 16)).astype(np.float32))
        x2 = rt.tensor(rng.standard_normal((2, 3, 16)).astype(np.float32))
        first = fn(x1)
        kept = first.numpy().copy()
        fn(x2)
        np.testing.assert_array_equal(first.numpy(), kept)


# --- the conv kernels' three column layouts give the same results ------------------------------

def _naive_conv(x, w, stride, padding, dilation, groups):
    """Direct sums over kernel positions: the reference for every layout."""
    n, c = x.shape[:2]
    cout, cg = w.shape[:2]
    og = cout // groups
    kernel = w.shape[2:]
    out = tuple(out_size(s, k, st, p, d) for s, k, st, p, d in zip(x.shape[2:], kernel, stride, padding, dilation))
    y = np.zeros((n, cout) + out)
    for pos, view in windows(np, x, kernel, out, stride, padding, dilation):
        wk = w[(slice(None), slice(None)) + pos]  # (Cout, C/groups)
        for gi in range(groups):
            y[:, gi * og:(gi + 1) * og] += np.einsum("oc,nc...->no...", wk[gi * og:(gi + 1) * og],
                                                     view[:, gi * cg:(gi + 1) * cg])
    return y


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 3), st.integers(1, 9), st.sampled_from([1, 3]), st.integers(1, 2), st.integers(1, 2),
       st.sampled_from([1, 2, 4]))
def test_conv_layouts_agree(n, size, k, stride, dilation, groups):
    """Batched columns, the wide grid and per-image columns (forced in turn) give the conv of
    direct sums; the weight and input gradients are its adjoints: <conv(x, w), g> equals
    <w, dL/dw> and <x, dL/dx>."""
    from flopcount.runtime.ops import _conv_kernels as K

    rng = np.random.default_rng(size * 7 + k)
    c = cout = 4
    padding = (k // 2) * dilation
    x = rng.standard_normal((n, c, size, size + 1))
    w = rng.standard_normal((cout, c // groups, k, k))
    out = tuple(out_size(s, k, stride, padding, dilation) for s in x.shape[2:])
    if any(o <= 0 for o in out):
        return
    geometry = ((stride, stride), (padding, padding), (dilation, dilation))
    expected = _naive_conv(x, w, *geometry, groups)
    g = rng.standard_normal(expected.shape)
    opad = tuple(s - ((o - 1) * stride - 2 * padding + dilation * (k - 1) + 1) for s, o in zip(x.shape[2:], out))
    saved = K.SMALL_MAP, K.WIDE_RATIO
    try:
        for small_map, wide_ratio in ((10**9, 1.15), (0, 10.0), (0, 0.0)):  # batched, wide, per image
            K.SMALL_MAP, K.WIDE_RATIO = small_map, wide_ratio
            y = K.conv_forward(np, x, w, None, *geometry, groups)
            gw = K.conv_weight_grad(np, x, g, (k, k), *geometry, groups)
            gx = K.conv_transpose_forward(np, g, w, None, geometry[0], geometry[1], opad, geometry[2], groups)
            np.testing.assert_allclose(y, expected, rtol=1e-10, atol=1e-10)
            np.testing.assert_allclose(np.vdot(w, gw), np.vdot(expected, g), rtol=1e-10)
            np.testing.assert_allclose(np.vdot(x, gx), np.vdot(expected, g), rtol=1e-10)
    finally:
        K.SMALL_MAP, K.WIDE_RATIO = saved


def test_release_drops_the_buffers():
    from flopcount.runtime.ops._scratch import release

    a = scratch(np, "test-release", (8,), np.float64)
    release()
    assert not np.shares_memory(a, scratch(np, "test-release", (8,), np.float64))
