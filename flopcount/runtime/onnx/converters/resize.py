"""ONNX Resize (and opset-9 Upsample) onto the runtime's ``upsample_nearest`` and
``upsample_bilinear`` ops.

The source positions of the output elements are computed from ONNX's rules (coordinate
transformation, and the rounding mode for nearest). When the runtime's op reads the same
pixels with the same weights (PyTorch's nearest, nearest-exact, or linear with or without
align_corners) that op is used; otherwise the resize is written as gathers of exactly those
pixels (and, for linear, their blend). Cubic, ``tf_crop_and_resize``, antialiasing and resizing
the batch or channel dims are not supported (an UnsupportedOpError names the node).
"""

from __future__ import annotations

import math

import numpy as np

from ...dispatch import apply
from ...ops.indexing import index_select
from ...ops import elementwise as ew
from ...ops.sampling import UpsampleBilinear, UpsampleNearest, _linear_taps, _nearest_index
from ._base import constant, converter


def _targets(ctx, x, scales, sizes):
    """(output sizes of every dim, per-dim scale given by ``scales`` or None)."""
    ndim = x.ndim
    axes = ctx.axes(ctx.attr("axes") or range(ndim), ndim, "axes")
    out = list(x.shape)
    given: list = [None] * ndim
    if sizes is not None and sizes.size:
        wanted = [int(s) for s in sizes.reshape(-1)]
        policy = ctx.attr("keep_aspect_ratio_policy", "stretch")
        if policy == "stretch":
            for a, s in zip(axes, wanted):
                out[a] = s
        elif policy in ("not_larger", "not_smaller"):
            pick = min if policy == "not_larger" else max
            scale = pick(s / x.shape[a] for a, s in zip(axes, wanted))
            for a in axes:
                out[a] = int(math.floor(scale * x.shape[a] + 0.5))  # round half up
        else:
            raise ctx.unsupported(f"keep_aspect_ratio_policy {policy!r} is not one of stretch, not_larger, not_smaller")
    elif scales is not None and scales.size:
        for a, s in zip(axes, scales.reshape(-1)):
            given[a] = float(s)
            out[a] = int(math.floor(x.shape[a] * float(s)))
    else:
        raise ctx.unsupported("neither 'scales' nor 'sizes' is given")
    if tuple(out[:2]) != tuple(x.shape[:2]) or any(g not in (None, 1.0) for g in given[:2]):
        raise ctx.unsupported(f"resizing the batch or channel dims ({x.shape} -> {tuple(out)}) is not supported")
    return tuple(out[2:]), given[2:]


def _source(ctx, size: int, out: int, scale) -> np.ndarray:
    """Source coordinate of every output element along one dim, by ONNX's
    coordinate_transformation_mode (in float32, as ONNX Runtime computes it)."""
    f = np.float32
    mode = ctx.attr("coordinate_transformation_mode", "half_pixel")
    r = f(scale) if scale is not None else f(out) / f(size)
    dst = np.arange(out, dtype=f)
    if mode in ("half_pixel", "pytorch_half_pixel"):
        if mode == "pytorch_half_pixel" and out == 1:
            return np.zeros(1, f)
        return (dst + f(0.5)) / r - f(0.5)
    if mode == "half_pixel_symmetric":
        offset = f(size) / f(2) * (f(1) - f(out) / (f(size) * r))
        return offset + (dst + f(0.5)) / r - f(0.5)
    if mode == "align_corners":
        return dst * f(size - 1) / f(out - 1) if out > 1 else np.zeros(1, f)
    if mode == "asymmetric":
        return dst / r
    if mode == "tf_half_pixel_for_nn":
        return (dst + f(0.5)) / r
    raise ctx.unsupported(f"coordinate_transformation_mode {mode!r} is not supported")


def _onnx_nearest(ctx, size: int, out: int, scale) -> np.ndarray:
    """Source indices along one dim by ONNX's coordinate transformation and nearest_mode."""
    src = _source(ctx, size, out, scale)
    rounding = ctx.attr("nearest_mode", "round_prefer_floor")
    tie = src - np.floor(src) == np.float32(0.5)
    if rounding == "floor":
        index = np.floor(src)
    elif rounding == "ceil":
        index = np.ceil(src)
    elif rounding == "round_prefer_floor":
        index = np.where(tie, np.floor(src), np.round(src))
    elif rounding == "round_prefer_ceil":
        index = np.where(tie, np.ceil(src), np.round(src))
    else:
        raise ctx.unsupported(f"nearest_mode {rounding!r} is not supported")
    return np.clip(index.astype(np.int64), 0, size - 1)


def _onnx_linear(ctx, size: int, out: int, scale) -> tuple:
    """(i0, i1, w1) along one dim: output = (1 − w1)·x[i0] + w1·x[i1], source clamped to the input."""
    src = np.clip(_source(ctx, size, out, scale), 0, size - 1)
    i0 = np.floor(src).astype(np.int64)
    return i0, np.minimum(i0 + 1, size - 1), (src - i0).astype(np.float32)


def _weights(taps, size: int) -> np.ndarray:
    """The (out, size) matrix of an interpolation's taps, to compare two ways of writing it."""
    i0, i1, w1 = taps
    m = np.zeros((len(i0), size))
    np.add.at(m, (np.arange(len(i0)), i0), 1 - w1.astype(np.float64))
    np.add.at(m, (np.arange(len(i0)), i1), w1.astype(np.float64))
    return m


def _nearest(ctx, x, out, given):
    sizes = x.shape[2:]
    wanted = [_onnx_nearest(ctx, n, o, s) for n, o, s in zip(sizes, out, given)]
    shortcut = len(out) == 2  # the runtime's 2-d kernel copies or halves indices on exact ratios
    candidates = ([tuple(given)] if None not in given else []) + [None]
    for exact in (False, True):
        for scales in candidates:
            picks = [_nearest_index(n, o, None if scales is None else scales[d], exact, shortcut)
                     for d, (n, o) in enumerate(zip(sizes, out))]
            if all(np.array_equal(p, w) for p, w in zip(picks, wanted)):
                return apply(UpsampleNearest, x, output_size=tuple(out), scales=scales, exact=exact)
    y = x  # no PyTorch mode picks these pixels: gather them along each dim
    for d, index in enumerate(wanted):
        if not np.array_equal(index, np.arange(sizes[d])):
            y = index_select(y, 2 + d, constant(index))
    return y


def _linear(ctx, x, out, given):
    if ctx.attr("antialias", 0) and any(o < n for o, n in zip(out, x.shape[2:])):
        raise ctx.unsupported("antialias=1 when downscaling is not supported")
    sizes = x.shape[2:]
    wanted = [_onnx_linear(ctx, n, o, s) for n, o, s in zip(sizes, out, given)]
    candidates = [(False, tuple(given))] if None not in given else []
    candidates += [(False, None), (True, None)]
    for align, scales in candidates:
        picks = [_linear_taps(n, o, None if scales is None else scales[d], align, x.dtype.np)
                 for d, (n, o) in enumerate(zip(sizes, out))]
        if all(np.allclose(_weights(p, n), _weights(w, n), atol=1e-6) for p, w, n in zip(picks, wanted, sizes)):
            return apply(UpsampleBilinear, x, output_size=tuple(out), scales=scales, align_corners=align)
    y = x  # no PyTorch mode has these taps: blend the gathered neighbours along each dim
    for d, (i0, i1, w1) in enumerate(wanted):
        a, b = index_select(y, 2 + d, constant(i0)), index_select(y, 2 + d, constant(i1))
        weight = constant(w1.astype(x.dtype.np).reshape((-1,) + (1,) * (len(sizes) - 1 - d)))
        y = ew.add(a, ew.mul(ew.sub(b, a), weight))
    return y


@converter("Resize", "Upsample")
def resize(ctx, x, roi=None, scales=None, sizes=None):
    if ctx.op_type == "Upsample" or ctx.opset < 11:
        # (X, scales) with Upsample's coordinates (asymmetric, nearest rounds down) before opset 11
        scales, roi, sizes = roi, None, None
        if scales is None and ctx.attr("scales"):  # an attribute before opset 9
            scales = constant(np.array(ctx.attr("scales"), np.float32))
        ctx.attrs = {**ctx.attrs, "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}
    out, given = _targets(ctx, x, ctx.const(scales, "input 'scales'"), ctx.const(sizes, "input 'sizes'"))
    mode = ctx.attr("mode", "nearest")
    if mode == "nearest":
        return _nearest(ctx, x, out, given)
    if mode in ("linear", "bilinear"):
        return _linear(ctx, x, out, given)
    raise ctx.unsupported(f"mode {mode!r} is not supported (nearest and linear are)")
