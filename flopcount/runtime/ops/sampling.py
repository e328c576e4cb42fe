"""Upsampling (nearest, linear/bilinear/trilinear) and ``interpolate``.

Both ops are separable: the output is built one spatial dim at a time, from a gather of source
indices (nearest) or a weighted pair of them (linear). Source indices follow PyTorch's formulas,
computed in the input's float precision as its kernels do, so the same pixels are picked.

Cost (COUNTING.md): nearest 0 FLOPs (a copy); bilinear 7·numel(out), the 4-tap weighted sum of
a straightforward kernel (4 multiplies, 3 adds), and in general 2^(d+1) − 1 per output element
for d interpolated dims (3 for linear, 15 for trilinear). Backward ops scatter-add gradients.
"""

from __future__ import annotations

__all__ = ["interpolate", "upsample", "upsample_nearest", "upsample_bilinear"]  # the functional API

import math
import warnings

import numpy as np

from ..dispatch import apply
from ..errors import ShapeError, UnsupportedOpError
from ..registry import Op, Spec, io_cost, numel, register_op
from ..sbp import linear_per_channel
from ._helpers import check_float


def _scale(size: int, out: int, scale) -> float:
    # PyTorch's compute_scales_value: 1/scale_factor when one was given, else in/out
    return 1.0 / scale if scale is not None and scale > 0 else size / out


def _nearest_index(size: int, out: int, scale, exact: bool, shortcut: bool) -> np.ndarray:
    """Source index of every output element along one dim (PyTorch's nearest / nearest-exact).

    ``shortcut``: PyTorch's 2-d kernel copies when out == in and halves when out == 2·in even
    if a scale_factor says otherwise; its 1-d and 3-d kernels always use the scale.
    """
    dst = np.arange(out)
    if shortcut and not exact and out == size:
        return dst
    if shortcut and not exact and out == 2 * size:
        return dst >> 1
    s = np.float32(_scale(size, out, scale))  # PyTorch computes these in float
    pos = (dst.astype(np.float32) + np.float32(0.5)) * s if exact else dst.astype(np.float32) * s
    return np.minimum(np.floor(pos).astype(np.int64), size - 1)


def _linear_taps(size: int, out: int, scale, align_corners: bool, dtype):
    """(i0, i1, w1) along one dim: output j = (1 − w1)·x[i0] + w1·x[i1] (PyTorch's rule, in
    its precision: double for float64, float otherwise)."""
    dtype = np.float64 if dtype == np.float64 else np.float32
    t = np.dtype(dtype).type
    dst = np.arange(out).astype(dtype)
    if align_corners:
        s = t((size - 1) / (out - 1)) if out > 1 else t(0)
        src = s * dst
    else:
        s = t(_scale(size, out, scale))
        src = np.maximum(s * (dst + t(0.5)) - t(0.5), t(0))
    i0 = src.astype(np.int64)
    i1 = i0 + (i0 < size - 1)
    w1 = np.clip(src - i0.astype(dtype), 0, 1).astype(dtype)
    return i0, i1, w1


def _along(ndim: int, d: int) -> tuple:
    """Shape to broadcast a per-index vector along spatial dim d of an (N, C, *spatial) array."""
    return (-1,) + (1,) * (ndim - 3 - d)


def _scatter_along(xp, g, axis: int, index: np.ndarray, size: int):
    """out[..., i, ...] = sum of g[..., j, ...] over the j with index[j] == i, along ``axis``."""
    moved = xp.moveaxis(g, axis, -1)
    rows = int(np.prod(moved.shape[:-1]))
    flat = (xp.arange(rows)[:, None] * size + xp.asarray(index)[None, :]).ravel()
    summed = xp.bincount(flat, weights=moved.reshape(rows, -1).ravel(), minlength=rows * size)
    out = summed.reshape(moved.shape[:-1] + (size,)).astype(g.dtype)
    return xp.ascontiguousarray(xp.moveaxis(out, -1, axis))


def _resized(op, x, output_size, scales) -> Spec:
    """The spec of ``x`` (N, C, *S) resampled to ``output_size``, the sizes checked first."""
    if x.ndim != len(output_size) + 2 or not output_size:
        raise ShapeError(f"{op}: input {x.shape} needs (N, C) and {len(output_size)} spatial dims "
                         f"for output_size {output_size}")
    if any(o < 1 for o in output_size) or any(n < 1 for n in x.shape[2:]):
        raise ShapeError(f"{op}: input {x.shape} and output_size {output_size} must be non-empty")
    if scales is not None and len(scales) != len(output_size):
        raise ShapeError(f"{op}: scales {scales} need one value per spatial dim of {x.shape}")
    return Spec(tuple(x.shape[:2]) + tuple(output_size), x.dtype, x.device)


def _scale_of(scales, d):
    return None if scales is None else scales[d]


@register_op("upsample_nearest", ptflops="upsample")
class UpsampleNearest(Op):
    """Nearest-neighbour resampling of x (N, C, *S) to ``output_size`` (``exact``: nearest-exact)."""

    def shape(x, *, output_size, scales, exact):
        return _resized("upsample_nearest", x, output_size, scales)

    def forward(xp, x, *, output_size, scales, exact):
        y = x
        for d, (n, o) in enumerate(zip(x.shape[2:], output_size)):
            index = _nearest_index(n, o, _scale_of(scales, d), exact, len(output_size) == 2)
            y = xp.take(y, xp.asarray(index), axis=2 + d)
        return y

    def vjp(g, out, x, *, output_size, scales, exact):
        return apply(UpsampleNearestBackward, g, input_size=tuple(x.shape[2:]), scales=scales, exact=exact)

    def cost(out, x, *, output_size, scales, exact):
        return io_cost(out, (x,))  # a gather: bytes moved, no arithmetic

    sbp = linear_per_channel


@register_op("upsample_nearest_backward")
class UpsampleNearestBackward(Op):
    """The gradient of upsample_nearest: every output gradient added to its source element."""
    backward = True  # dispatched by a vjp

    def shape(g, *, input_size, scales, exact):
        return _resized("upsample_nearest_backward", g, tuple(input_size), scales)

    def forward(xp, g, *, input_size, scales, exact):
        y = g
        for d, (n, o) in enumerate(zip(input_size, g.shape[2:])):
            index = _nearest_index(n, o, _scale_of(scales, d), exact, len(input_size) == 2)
            y = _scatter_along(xp, y, 2 + d, index, n)
        return y

    def vjp(gg, out, g, *, input_size, scales, exact):
        # linear in g: the adjoint of the scatter is the gather
        return apply(UpsampleNearest, gg, output_size=tuple(g.shape[2:]), scales=scales, exact=exact)

    def cost(out, g, *, input_size, scales, exact):
        return io_cost(out, (g,), flops=numel(g))  # one add per output gradient element

    sbp = linear_per_channel


@register_op("upsample_bilinear", ptflops="upsample")
class UpsampleBilinear(Op):
    """Linear interpolation along every spatial dim: linear (1-d), bilinear (2-d), trilinear (3-d)."""

    def shape(x, *, output_size, scales, align_corners):
        check_float("upsample_bilinear", x)
        return _resized("upsample_bilinear", x, output_size, scales)

    def forward(xp, x, *, output_size, scales, align_corners):
        y = x
        for d, (n, o) in enumerate(zip(x.shape[2:], output_size)):
            i0, i1, w1 = _linear_taps(n, o, _scale_of(scales, d), align_corners, x.dtype)
            w1 = xp.asarray(w1.reshape(_along(x.ndim, d)))
            a = xp.take(y, xp.asarray(i0), axis=2 + d)
            b = xp.take(y, xp.asarray(i1), axis=2 + d)
            y = a + (b - a) * w1
        return y

    def vjp(g, out, x, *, output_size, scales, align_corners):
        return apply(UpsampleBilinearBackward, g, input_size=tuple(x.shape[2:]), scales=scales,
                     align_corners=align_corners)

    def cost(out, x, *, output_size, scales, align_corners):
        # 2^d taps of a straightforward kernel: 2^d multiplies and 2^d − 1 adds (7 for bilinear)
        taps = 2 ** len(output_size)
        return io_cost(out, (x,), flops=numel(out) * (2 * taps - 1))

    sbp = linear_per_channel


@register_op("upsample_bilinear_backward")
class UpsampleBilinearBackward(Op):
    """The gradient of upsample_bilinear: each output gradient split over its source taps."""
    backward = True  # dispatched by a vjp

    def shape(g, *, input_size, scales, align_corners):
        return _resized("upsample_bilinear_backward", g, tuple(input_size), scales)

    def forward(xp, g, *, input_size, scales, align_corners):
        y = g
        for d, (n, o) in enumerate(zip(input_size, g.shape[2:])):
            i0, i1, w1 = _linear_taps(n, o, _scale_of(scales, d), align_corners, g.dtype)
            w1 = xp.asarray(w1.reshape(_along(g.ndim, d)))
            part1 = y * w1
            y = _scatter_along(xp, y - part1, 2 + d, i0, n) + _scatter_along(xp, part1, 2 + d, i1, n)
        return y

    def vjp(gg, out, g, *, input_size, scales, align_corners):
        # linear in g: its adjoint is the interpolation itself
        return apply(UpsampleBilinear, gg, output_size=tuple(g.shape[2:]), scales=scales,
                     align_corners=align_corners)

    def cost(out, g, *, input_size, scales, align_corners):
        # per output gradient element: 2^d weight multiplies and 2^d scattered adds
        return io_cost(out, (g,), flops=numel(g) * 2 * 2 ** (g.ndim - 2))

    sbp = linear_per_channel


# --- functional API ----------------------------------------------------------------------------

_LINEAR_DIMS = {"linear": 1, "bilinear": 2, "trilinear": 3}


def _sizes_and_scales(x, size, scale_factor, recompute_scale_factor):
    nd = x.ndim - 2
    if size is not None and scale_factor is not None:
        raise ValueError("only one of size or scale_factor should be defined")
    if size is not None:
        sizes = (size,) * nd if isinstance(size, int) else tuple(size)
        if len(sizes) != nd:
            raise ValueError(f"Input and output must have the same number of spatial dimensions, but got "
                             f"input with spatial dimensions of {list(x.shape[2:])} and output size of {list(sizes)}. "
                             f"Please provide input tensor in (N, C, d1, d2, ...,dK) format and output size in "
                             f"(o1, o2, ...,oK) format.")
        return tuple(int(s) for s in sizes), None
    if scale_factor is None:
        raise ValueError("either size or scale_factor should be defined")
    factors = (float(scale_factor),) * nd if isinstance(scale_factor, (int, float)) \
        else tuple(float(f) for f in scale_factor)
    if len(factors) != nd:
        raise ValueError(f"Input and scale_factor must have the same number of spatial dimensions, but got "
                         f"input with spatial dimensions of {list(x.shape[2:])} and scale_factor of "
                         f"shape {list(factors)}.")
    sizes = tuple(int(math.floor(float(n) * f)) for n, f in zip(x.shape[2:], factors))
    return sizes, None if recompute_scale_factor else factors


def interpolate(input, size=None, scale_factor=None, mode: str = "nearest", align_corners=None,
                recompute_scale_factor=None, antialias: bool = False):
    """Resize (N, C, *spatial) to ``size`` or by ``scale_factor`` (PyTorch's ``F.interpolate``).

    Modes: nearest, nearest-exact, linear (3-d input), bilinear (4-d), trilinear (5-d), and
    area (an adaptive average pool).

    >>> import flopcount.runtime as rt
    >>> interpolate(rt.tensor([[[1.0, 2.0]]]), scale_factor=2).tolist()
    [[[1.0, 1.0, 2.0, 2.0]]]
    >>> interpolate(rt.tensor([[[1.0, 2.0]]]), size=3, mode="linear", align_corners=True).tolist()
    [[[1.0, 1.5, 2.0]]]
    """
    if input.ndim < 3:
        raise ShapeError(f"interpolate: expects a (N, C, *spatial) input, got {input.shape}")
    if mode in ("nearest", "area", "nearest-exact"):
        if align_corners is not None:
            raise ValueError("align_corners option can only be set with the interpolating modes: "
                             "linear | bilinear | bicubic | trilinear")
    elif mode not in _LINEAR_DIMS:
        raise UnsupportedOpError(f"interpolate: mode {mode!r} is not supported (nearest, nearest-exact, "
                                 f"linear, bilinear, trilinear, area)")
    if antialias:
        raise UnsupportedOpError("interpolate: antialias=True is not supported")
    sizes, scales = _sizes_and_scales(input, size, scale_factor, recompute_scale_factor)
    if mode in _LINEAR_DIMS:
        need = _LINEAR_DIMS[mode]
        if input.ndim - 2 != need:
            raise NotImplementedError(f"Got {input.ndim}D input, but {mode} mode needs {need + 2}D input")
        return apply(UpsampleBilinear, input, output_size=sizes, scales=scales, align_corners=bool(align_corners))
    if mode == "area":
        from .pooling import AdaptiveAvgPool

        return apply(AdaptiveAvgPool, input, output_size=sizes)  # PyTorch's area mode is this pool
    return apply(UpsampleNearest, input, output_size=sizes, scales=scales, exact=mode == "nearest-exact")


def upsample(input, size=None, scale_factor=None, mode: str = "nearest", align_corners=None):
    """Deprecated PyTorch alias of :func:`interpolate` (it warns as PyTorch does)."""
    warnings.warn("nn.functional.upsample is deprecated. Use nn.functional.interpolate instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input, size=None, scale_factor=None):
    """Deprecated PyTorch alias: ``interpolate(..., mode='nearest')``."""
    warnings.warn("nn.functional.upsample_nearest is deprecated. Use nn.functional.interpolate instead.",
                  stacklevel=2)
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):
    """Deprecated PyTorch alias: ``interpolate(..., mode='bilinear', align_corners=True)``."""
    warnings.warn("nn.functional.upsample_bilinear is deprecated. Use nn.functional.interpolate instead.",
                  stacklevel=2)
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)
