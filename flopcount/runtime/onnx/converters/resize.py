"""ONNX Resize (and opset-9 Upsample) onto the runtime's ``upsample_nearest`` and
``upsample_bilinear`` ops.

Nearest: the source index of every output element is computed from ONNX's rule (coordinate
transformation and rounding mode); when it is the index the runtime's op picks (PyTorch's
``nearest`` or ``nearest-exact``), that op is used, otherwise a gather of exactly those indices.
Linear: ``half_pixel``/``pytorch_half_pixel`` are ``align_corners=False``, ``align_corners`` is
itself. Cubic, ``tf_crop_and_resize``, antialiasing and resizing the batch or channel dims
are not supported (an UnsupportedOpError names the node).
"""

from __future__ import annotations

import math

import numpy as np

from ...dispatch import apply
from ...ops.indexing import index_select
from ...ops.sampling import UpsampleBilinear, UpsampleNearest, _nearest_index
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


def _onnx_nearest(ctx, size: int, out: int, scale) -> np.ndarray:
    """Source indices along one dim by ONNX's formulas (float32, as ONNX Runtime computes)."""
    f = np.float32
    mode = ctx.attr("coordinate_transformation_mode", "half_pixel")
    r = f(scale) if scale is not None else f(out) / f(size)
    dst = np.arange(out, dtype=f)
    if mode in ("half_pixel", "pytorch_half_pixel"):
        src = (dst + f(0.5)) / r - f(0.5)
        if mode == "pytorch_half_pixel" and out == 1:
            src = np.zeros(1, f)
    elif mode == "half_pixel_symmetric":
        width = f(size) * r
        offset = f(size) / f(2) * (f(1) - f(out) / width)
        src = offset + (dst + f(0.5)) / r - f(0.5)
    elif mode == "align_corners":
        src = dst * f(size - 1) / f(out - 1) if out > 1 else np.zeros(1, f)
    elif mode == "asymmetric":
        src = dst / r
    elif mode == "tf_half_pixel_for_nn":
        src = (dst + f(0.5)) / r
    else:
        raise ctx.unsupported(f"coordinate_transformation_mode {mode!r} is not supported")
    rounding = ctx.attr("nearest_mode", "round_prefer_floor")
    if rounding == "floor":
        index = np.floor(src)
    elif rounding == "ceil":
        index = np.ceil(src)
    elif rounding == "round_prefer_floor":
        index = np.where(src - np.floor(src) == f(0.5), np.floor(src), np.round(src))
    elif rounding == "round_prefer_ceil":
        index = np.where(src - np.floor(src) == f(0.5), np.ceil(src), np.round(src))
    else:
        raise ctx.unsupported(f"nearest_mode {rounding!r} is not supported")
    return np.clip(index.astype(np.int64), 0, size - 1)


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
    mode = ctx.attr("coordinate_transformation_mode", "half_pixel")
    if mode == "align_corners":
        align = True
    elif mode == "half_pixel" or (mode == "pytorch_half_pixel" and all(o > 1 for o in out)):
        align = False
    else:
        raise ctx.unsupported(f"linear mode with coordinate_transformation_mode {mode!r} is not supported "
                              f"(half_pixel, pytorch_half_pixel and align_corners are)")
    if ctx.attr("antialias", 0) and any(o < n for o, n in zip(out, x.shape[2:])):
        raise ctx.unsupported("antialias=1 when downscaling is not supported")
    scales = None if None in given or align else tuple(given)
    return apply(UpsampleBilinear, x, output_size=tuple(out), scales=scales, align_corners=align)


@converter("Resize", "Upsample")
def resize(ctx, x, roi=None, scales=None, sizes=None):
    if ctx.op_type == "Upsample" or ctx.opset < 11:  # (X, scales) before opset 11
        scales, roi, sizes = roi, None, None
        if ctx.op_type == "Upsample" and ctx.attr("mode", "nearest") == "nearest":
            ctx.attrs = {**ctx.attrs, "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}
        elif ctx.op_type == "Upsample":
            ctx.attrs = {**ctx.attrs, "coordinate_transformation_mode": "asymmetric"}
    out, given = _targets(ctx, x, ctx.const(scales, "input 'scales'"), ctx.const(sizes, "input 'sizes'"))
    mode = ctx.attr("mode", "nearest")
    if mode == "nearest":
        return _nearest(ctx, x, out, given)
    if mode in ("linear", "bilinear"):
        return _linear(ctx, x, out, given)
    raise ctx.unsupported(f"mode {mode!r} is not supported (nearest and linear are)")
