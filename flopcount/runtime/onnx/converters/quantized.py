"""ONNX's quantization ops written as the runtime's ops: QuantizeLinear and DequantizeLinear
(per tensor, per axis, blocked), DynamicQuantizeLinear, MatMulInteger, ConvInteger,
QLinearMatMul and QLinearConv.

Each is the arithmetic ONNX's spec gives it: subtract the zero points in int32, multiply (a
matmul or a conv), rescale, round half to even, clamp to the target's range, cast. The counts
are those ops' counts; a convolution over integers runs as a float64 conv (exact for 8- and
16-bit operands, as the runtime's conv computes in floating point) and is counted as one.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from ... import dtypes as _dt
from ...ops import elementwise as ew
from ...ops import linalg, movement, reduction
from ..elem_types import to_dtype
from ._base import converter
from .nn import conv

_INTEGER = (_dt.uint8, _dt.int8, _dt.uint16, _dt.int16, _dt.int32, _dt.int4, _dt.uint4)


def _range(dtype) -> tuple:
    info = ml_dtypes.iinfo(dtype.np) if dtype in (_dt.int4, _dt.uint4) else np.iinfo(dtype.np)
    return int(info.min), int(info.max)


def _along(ctx, v, x, axis: int, block: int):
    """Scale or zero point ``v`` broadcastable to ``x``: one value, one per index of ``axis``,
    or (blocked) one per ``block`` consecutive indices of ``axis``."""
    if v.ndim == 0 or v.numel() == 1:
        return movement.reshape(v, ())
    axis = ctx.axis(axis, x.ndim)
    if not block:
        dims = [1] * x.ndim
        dims[axis] = v.numel()
        return movement.reshape(v, tuple(dims))
    if v.ndim != x.ndim:
        raise ctx.unsupported(f"a blocked scale must have the input's rank {x.ndim}, got shape {tuple(v.shape)}")
    grown = list(v.shape)
    grown.insert(axis + 1, block)
    v = movement.expand(movement.unsqueeze(v, axis + 1), tuple(grown))
    merged = list(v.shape[:axis]) + [v.shape[axis] * block] + list(v.shape[axis + 2:])
    return movement.narrow(movement.reshape(v, tuple(merged)), axis, 0, x.shape[axis])


def _saturate_to(x, dtype, saturate: bool = True):
    """Floating ``x`` cast to ``dtype``: integers rounded half to even and clamped to their
    range, float8 clamped to its largest finite value (unless ``saturate`` is off)."""
    if dtype in _dt.FLOAT8:
        if saturate:
            limit = float(ml_dtypes.finfo(dtype.np).max)
            x = ew.clamp(x, -limit, limit)
        return ew.cast(x, dtype)
    low, high = _range(dtype)
    return ew.cast(ew.clamp(ew.round(x), low, high), dtype)


@converter("QuantizeLinear")
def quantize_linear(ctx, x, scale, zero_point=None):
    if zero_point is not None:
        dtype = zero_point.dtype
    elif ctx.attr("output_dtype"):
        dtype = to_dtype(ctx.attr("output_dtype"), f"{ctx.where}: attribute 'output_dtype'")
    else:
        dtype = _dt.uint8
    axis, block = ctx.attr("axis", 1), ctx.attr("block_size", 0)
    if ctx.attr("precision"):
        precision = to_dtype(ctx.attr("precision"), f"{ctx.where}: attribute 'precision'")
        x, scale = ew.cast(x, precision), ew.cast(scale, precision)
    scaled = ew.div(x, _along(ctx, scale, x, axis, block))
    if dtype in _dt.FLOAT8:
        return _saturate_to(scaled, dtype, bool(ctx.attr("saturate", 1)))
    if dtype not in _INTEGER:
        raise ctx.unsupported(f"quantizing to {dtype.name} is not an ONNX quantized type")
    if zero_point is not None:
        # rint(x / scale) + zero point, in floating point: exact for every integer type here
        scaled = ew.add(ew.round(scaled), ew.cast(_along(ctx, zero_point, x, axis, block), scaled.dtype))
    return _saturate_to(scaled, dtype)


@converter("DequantizeLinear")
def dequantize_linear(ctx, x, scale, zero_point=None):
    axis, block = ctx.attr("axis", 1), ctx.attr("block_size", 0)
    values = ew.cast(x, _dt.float32)
    if zero_point is not None and x.dtype not in _dt.FLOAT8:  # float8 zero points are zero
        values = ew.sub(values, ew.cast(_along(ctx, zero_point, x, axis, block), _dt.float32))
    y = ew.mul(values, _along(ctx, scale, x, axis, block))
    out = to_dtype(ctx.attr("output_dtype"), f"{ctx.where}: attribute 'output_dtype'") \
        if ctx.attr("output_dtype") else scale.dtype
    return ew.cast(y, out) if y.dtype != out else y


@converter("DynamicQuantizeLinear")
def dynamic_quantize_linear(ctx, x):
    # uint8 over [min(x, 0), max(x, 0)]: the scale and zero point come from the data
    low, high = ew.minimum(reduction.amin(x), 0.0), ew.maximum(reduction.amax(x), 0.0)
    span = ew.sub(high, low)
    scale = ew.div(ew.where(ew.eq(span, 0.0), ew.add(span, 1.0), span), 255.0)
    zero = ew.round(ew.clamp(ew.neg(ew.div(low, scale)), 0.0, 255.0))
    y = ew.cast(ew.clamp(ew.add(ew.round(ew.div(x, scale)), zero), 0.0, 255.0), _dt.uint8)
    return y, scale, ew.cast(zero, _dt.uint8)


def _minus_zero_point(x, zero_point, dtype=_dt.int32):
    x = ew.cast(x, dtype)
    return x if zero_point is None else ew.sub(x, ew.cast(zero_point, dtype))


def _row_zero_point(zp, a):
    """A's zero point: one value, or one per row of A (shape (M,) -> (M, 1))."""
    if zp is None or zp.ndim == 0 or zp.numel() == 1:
        return None if zp is None else movement.reshape(zp, ())
    return movement.reshape(zp, tuple(zp.shape) + (1,))


@converter("MatMulInteger")
def matmul_integer(ctx, a, b, a_zero_point=None, b_zero_point=None):
    return linalg.matmul(_minus_zero_point(a, _row_zero_point(a_zero_point, a)),
                         _minus_zero_point(b, b_zero_point))


def _channel_zero_point(zp, w):
    """W's zero point: one value, or one per output channel (shape (M,) -> (M, 1, 1...))."""
    if zp is None or zp.ndim == 0 or zp.numel() == 1:
        return None if zp is None else movement.reshape(zp, ())
    return movement.reshape(zp, (zp.numel(),) + (1,) * (w.ndim - 1))


def _integer_conv(ctx, x, w, x_zero_point, w_zero_point, bias=None):
    xs = _minus_zero_point(x, x_zero_point, _dt.float64)
    ws = _minus_zero_point(w, _channel_zero_point(w_zero_point, w), _dt.float64)
    return conv(ctx, xs, ws, None if bias is None else ew.cast(bias, _dt.float64))


@converter("ConvInteger")
def conv_integer(ctx, x, w, x_zero_point=None, w_zero_point=None):
    return ew.cast(_integer_conv(ctx, x, w, x_zero_point, w_zero_point), _dt.int32)


def _rescale(product, scales, y_scale, zero_point, default):
    """Requantize an int32 (or float64) product: times (input scales / y_scale), the factor in
    the scales' dtype and the product in float64, as ONNX's reference computes it; plus the
    output zero point; rounded and clamped to its type (``default`` without one)."""
    factor = ew.div(ew.mul(*scales), y_scale)
    y = ew.mul(ew.cast(product, _dt.float64), ew.cast(factor, _dt.float64))
    dtype = zero_point.dtype if zero_point is not None else default
    if zero_point is not None:
        y = ew.add(y, ew.cast(zero_point, _dt.float64))
    return _saturate_to(y, dtype)


@converter("QLinearMatMul")
def qlinear_matmul(ctx, a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point=None):
    product = linalg.matmul(_minus_zero_point(a, a_zero_point), _minus_zero_point(b, b_zero_point))
    return _rescale(product, (a_scale, b_scale), y_scale, y_zero_point, a.dtype)


@converter("QLinearConv")
def qlinear_conv(ctx, x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point=None, bias=None):
    product = _integer_conv(ctx, x, w, x_zero_point, w_zero_point, bias)
    if w_scale.numel() > 1:  # one per output channel, along dim 1 of the output
        w_scale = movement.reshape(w_scale, (1, w_scale.numel()) + (1,) * (x.ndim - 2))
    return _rescale(product, (x_scale, w_scale), y_scale, y_zero_point, x.dtype)
