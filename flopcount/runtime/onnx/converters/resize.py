"""ONNX Resize (and opset-9 Upsample) onto the runtime's ``upsample_nearest``,
``upsample_bilinear`` and ``resample`` ops.

The source positions of the output elements are computed from ONNX's rules (coordinate
transformation, and the rounding mode for nearest). When the runtime's upsample op reads the
same pixels with the same weights (PyTorch's nearest, nearest-exact, or linear with or without
align_corners) that op is used; otherwise each resized dim is a ``resample`` with the taps ONNX's
rule gives (linear, cubic, their antialiased filters, ``exclude_outside``), a gather for nearest,
and crop-and-resize's extrapolated positions set to ``extrapolation_value``.
"""

from __future__ import annotations

import math

import numpy as np

from ...dispatch import apply
from ...ops.grid_sample import cubic_weights
from ...ops.indexing import index_select
from ...ops import elementwise as ew
from ...ops.resample import resample
from ...ops.sampling import UpsampleBilinear, UpsampleNearest, _linear_taps, _nearest_index
from ._base import constant, converter


def _targets(ctx, x, scales, sizes):
    """(output size of every dim, per-dim scale given by ``scales`` or None, per-dim scale in
    force: the given one, else output / input or the one scale a keep-aspect policy picks)."""
    ndim = x.ndim
    axes = ctx.axes(ctx.attr("axes") or range(ndim), ndim, "axes")
    out = list(x.shape)
    given: list = [None] * ndim
    ratio = [1.0] * ndim
    if sizes is not None and sizes.size:
        wanted = [int(s) for s in sizes.reshape(-1)]
        policy = ctx.attr("keep_aspect_ratio_policy", "stretch")
        if policy == "stretch":
            for a, s in zip(axes, wanted):
                out[a], ratio[a] = s, s / x.shape[a] if x.shape[a] else 1.0
        elif policy in ("not_larger", "not_smaller"):
            pick = min if policy == "not_larger" else max
            scale = pick(s / x.shape[a] for a, s in zip(axes, wanted))
            for a in axes:
                out[a], ratio[a] = int(math.floor(scale * x.shape[a] + 0.5)), scale  # round half up
        else:
            raise ctx.unsupported(f"keep_aspect_ratio_policy {policy!r} is not one of stretch, not_larger, not_smaller")
    elif scales is not None and scales.size:
        for a, s in zip(axes, scales.reshape(-1)):
            given[a] = ratio[a] = float(s)
            out[a] = int(math.floor(x.shape[a] * float(s)))
    else:
        raise ctx.unsupported("neither 'scales' nor 'sizes' is given")
    return tuple(out), given, ratio


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
    if mode == "align_corners":  # over the output's width scale·size, which a scale leaves fractional
        width = r * f(size)
        return dst * f(size - 1) / (width - f(1)) if width != 1 else np.zeros(out, f)
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
    sizes = x.shape[2:]
    wanted = [_onnx_linear(ctx, n, o, s) for n, o, s in zip(sizes, out, given)]
    candidates = [(False, tuple(given))] if None not in given else []
    candidates += [(False, None), (True, None)]
    for align, scales in candidates:
        picks = [_linear_taps(n, o, None if scales is None else scales[d], align, x.dtype.np)
                 for d, (n, o) in enumerate(zip(sizes, out))]
        if all(np.allclose(_weights(p, n), _weights(w, n), atol=1e-6) for p, w, n in zip(picks, wanted, sizes)):
            return apply(UpsampleBilinear, x, output_size=tuple(out), scales=scales, align_corners=align)
    y = x  # no PyTorch mode has these taps: two-tap resamples along each dim
    for d, (i0, i1, w1) in enumerate(wanted):
        index = np.stack([i0, i1], axis=1)
        weight = np.stack([1 - w1, w1], axis=1).astype(x.dtype.np)
        y = resample(y, constant(index), constant(weight), 2 + d)
    return y


# --- any mode, any dim: ONNX's taps as a resample per dim ----------------------------------------

def _onnx_coordinates(ctx, size: int, out: int, scale: float, roi) -> tuple:
    """(source coordinate of each output, which of them crop-and-resize extrapolates or None),
    in float64 as ONNX's reference computes them for the interpolating modes."""
    mode = ctx.attr("coordinate_transformation_mode", "half_pixel")
    y = np.arange(out, dtype=np.float64)
    width = scale * size
    if mode == "align_corners":
        return (np.zeros(out) if width == 1 else y * (size - 1) / (width - 1)), None
    if mode == "asymmetric":
        return y / scale, None
    if mode == "tf_crop_and_resize":
        start, end = roi
        src = np.full(out, (end - start) * (size - 1) / 2) if width == 1 else y * (end - start) * (size - 1) / (width - 1)
        src = src + start * (size - 1)
        return src, (src < 0) | (src > size - 1)
    if mode == "pytorch_half_pixel":
        return (np.full(out, -0.5) if width == 1 else (y + 0.5) / scale - 0.5), None
    if mode == "half_pixel":
        return (y + 0.5) / scale - 0.5, None
    if mode == "half_pixel_symmetric":
        offset = size / 2 * (1 - out / width)
        return offset + (y + 0.5) / scale - 0.5, None
    raise ctx.unsupported(f"coordinate_transformation_mode {mode!r} is not supported")


def _filter_weights(kind: str, ratio: float, scale: float, a: float) -> np.ndarray:
    """Weights of the taps around a source coordinate ``ratio`` past a pixel (in (0, 1]): the
    plain linear or cubic taps, or with ``kind`` "aa-..." the filter widened by 1 / scale
    (antialiasing when downscaling) and normalized."""
    if kind == "linear":
        return np.array([1 - ratio, ratio])
    if kind == "cubic":
        return np.array(cubic_weights(ratio, a))
    scale = min(scale, 1.0)
    if kind == "aa-linear":
        start = int(np.floor(-1 / scale) + 1)
        args = (np.arange(start, 2 - start) - ratio) * scale
        w = np.clip(1 - np.abs(args), 0, 1)
    else:
        start = int(np.floor(-2 / scale) + 1)
        d = np.abs(scale * (np.arange(start, 2 - start) - ratio))
        w = np.where(d <= 1, (a + 2) * d ** 3 - (a + 3) * d ** 2 + 1,
                     np.where(d < 2, a * d ** 3 - 5 * a * d ** 2 + 8 * a * d - 4 * a, 0.0))
    return w / w.sum()


def _onnx_taps(ctx, kind: str, size: int, out: int, scale: float, roi) -> tuple:
    """(index (out, T), weight (out, T), extrapolated or None) along one dim, by ONNX's rule: the
    T source pixels nearest the coordinate (edge pixels repeated past the border)."""
    src, extrapolated = _onnx_coordinates(ctx, size, out, scale, roi)
    whole = np.floor(src)
    ratios = np.where(src == whole, 1.0, src - whole)
    a = float(ctx.attr("cubic_coeff_a", -0.75))
    weight = np.stack([_filter_weights(kind, float(r), scale, a) for r in ratios]) if out else np.zeros((0, 2))
    taps = weight.shape[1]
    pad = int(np.ceil(taps / 2))
    padded = src + pad
    base = np.floor(padded).astype(np.int64)
    if taps % 2 == 0:  # windows centred between pixels; a tie goes to the lower one
        first = base + np.where(padded == base, -(taps // 2), -(taps // 2) + 1)
    else:
        first = base + np.where(padded - base <= 0.5, -((taps - 1) // 2), -((taps - 1) // 2) + 1)
    index = first[:, None] + np.arange(taps)[None, :] - pad
    if ctx.attr("exclude_outside", 0):
        weight = np.where((index < 0) | (index >= size), 0.0, weight)
        total = weight.sum(axis=-1, keepdims=True)
        weight = weight / np.where(total == 0, 1.0, total)
    return np.clip(index, 0, size - 1), weight, extrapolated


def _resampled(ctx, x, out, ratio, roi):
    """``x`` resized dim by dim with ``resample`` (and a gather for nearest without crop)."""
    mode = ctx.attr("mode", "nearest")
    antialias = bool(ctx.attr("antialias", 0))
    kind = {"linear": "linear", "bilinear": "linear", "cubic": "cubic", "bicubic": "cubic"}.get(mode, mode)
    if kind not in ("nearest", "linear", "cubic"):
        raise ctx.unsupported(f"mode {mode!r} is not supported (nearest, linear and cubic are)")
    crop = ctx.attr("coordinate_transformation_mode", "half_pixel") == "tf_crop_and_resize"
    fill = float(ctx.attr("extrapolation_value", 0.0))
    y = x
    for d in range(x.ndim):
        size, scale = x.shape[d], ratio[d]
        pair = (float(roi[d]), float(roi[d + x.ndim])) if crop else None
        if out[d] == size and scale == 1.0 and (pair is None or pair == (0.0, 1.0)):
            continue
        if kind == "nearest" and not crop:
            index = _onnx_nearest(ctx, size, out[d], scale)
            y = index_select(y, d, constant(index))
            continue
        if kind == "nearest":
            src, extrapolated = _onnx_coordinates(ctx, size, out[d], scale, pair)
            index, weight = _rounded(ctx, src, size)[:, None], np.ones((out[d], 1))
        else:
            index, weight, extrapolated = _onnx_taps(ctx, ("aa-" if antialias else "") + kind, size, out[d],
                                                     scale, pair)
        y = resample(y, constant(index.astype(np.int64)), constant(weight.astype(x.dtype.np)), d)
        if extrapolated is not None and extrapolated.any():
            where = extrapolated.reshape((-1,) + (1,) * (x.ndim - d - 1))
            y = ew.where(constant(where), constant(np.array(fill, x.dtype.np)), y)
    return y


def _rounded(ctx, src: np.ndarray, size: int) -> np.ndarray:
    """Nearest source pixel of each coordinate by ``nearest_mode``."""
    rounding = ctx.attr("nearest_mode", "round_prefer_floor")
    tie = src - np.floor(src) == 0.5
    picks = {"floor": np.floor(src), "ceil": np.ceil(src),
             "round_prefer_floor": np.where(tie, np.floor(src), np.round(src)),
             "round_prefer_ceil": np.where(tie, np.ceil(src), np.round(src))}
    if rounding not in picks:
        raise ctx.unsupported(f"nearest_mode {rounding!r} is not supported")
    return np.clip(picks[rounding].astype(np.int64), 0, size - 1)


def _fast_path(ctx, x, out, given):
    """The runtime's upsample op when it reads the same pixels with the same weights, else None."""
    mode = ctx.attr("mode", "nearest")
    spatial = x.ndim >= 3 and tuple(out[:2]) == tuple(x.shape[:2]) and all(g in (None, 1.0) for g in given[:2])
    if not spatial or ctx.attr("coordinate_transformation_mode", "half_pixel") == "tf_crop_and_resize":
        return None
    out, given = out[2:], given[2:]
    if mode == "nearest":
        return _nearest(ctx, x, out, given)
    downscaled = any(o < n for o, n in zip(out, x.shape[2:]))
    if mode in ("linear", "bilinear") and not (ctx.attr("antialias", 0) and downscaled):
        return _linear(ctx, x, out, given)
    return None


@converter("Resize", "Upsample")
def resize(ctx, x, roi=None, scales=None, sizes=None):
    if ctx.op_type == "Upsample" or ctx.opset < 11:
        # (X, scales) with Upsample's coordinates (asymmetric, nearest rounds down) before opset 11
        scales, roi, sizes = roi, None, None
        if scales is None and ctx.attr("scales"):  # an attribute before opset 9
            scales = constant(np.array(ctx.attr("scales"), np.float32))
        ctx.attrs = {**ctx.attrs, "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}
    out, given, ratio = _targets(ctx, x, ctx.const(scales, "input 'scales'"), ctx.const(sizes, "input 'sizes'"))
    y = _fast_path(ctx, x, out, given)
    if y is not None:
        return y
    boxes = ctx.const(roi, "input 'roi'")
    if ctx.attr("coordinate_transformation_mode") == "tf_crop_and_resize":
        boxes = _full_roi(ctx, boxes, x.ndim)
    return _resampled(ctx, x, out, ratio, boxes)


def _full_roi(ctx, roi, ndim: int) -> np.ndarray:
    """crop-and-resize's roi as (starts of every dim, ends of every dim), from the one given
    for ``axes`` (whole dims elsewhere)."""
    if roi is None or roi.size == 0:
        raise ctx.unsupported("coordinate_transformation_mode 'tf_crop_and_resize' needs input 'roi'")
    axes = ctx.axes(ctx.attr("axes") or range(ndim), ndim, "axes")
    full = np.array([0.0] * ndim + [1.0] * ndim)
    values = roi.reshape(-1).astype(np.float64)
    for i, a in enumerate(axes):
        full[a], full[a + ndim] = values[i], values[i + len(axes)]
    return full
