"""ONNX's quantization ops written as the runtime's ops: QuantizeLinear and DequantizeLinear
(per tensor, per axis, blocked), DynamicQuantizeLinear, MatMulInteger, ConvInteger,
QLinearMatMul and QLinearConv.

MACs are reported in the dtype they run in (``mac_dtype``): the integer GEMMs and convs in
their operands' narrow integer type, though they are written here as int32 or float64 ops; and
in a QDQ file, a Conv, MatMul or Gemm whose data and weight both come out of DequantizeLinear
runs on the quantized numbers, as onnxruntime fuses it into QLinearConv (and TensorRT into an
int8 kernel): its MACs are int8 MACs.

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

_INTEGER = (_dt.uint8, _dt.int8, _dt.uint16, _dt.int16, _dt.int32, _dt.int4, _dt.uint4, _dt.int2, _dt.uint2)
_SUB_BYTE = (_dt.int4, _dt.uint4, _dt.int2, _dt.uint2)  # numpy's iinfo does not know them


def _range(dtype) -> tuple:
    info = ml_dtypes.iinfo(dtype.np) if dtype in _SUB_BYTE else np.iinfo(dtype.np)
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


# narrow floating types a quantization or a saturating Cast clamps to their largest finite value
NARROW_FLOATS = _dt.FLOAT8 + (_dt.float4_e2m1fn,)


def to_e8m0(x, saturate: bool = True, round_mode: str = "up"):
    """``x`` cast to float8_e8m0fnu (a power of two: only an exponent) as ONNX's Cast-24 does:
    float32's exponent field, rounded up when any fraction bit is set (``round_mode="up"``),
    half to even on the dropped bits (``"nearest"``) or dropped (``"down"``); infinities and
    NaN become NaN; with ``saturate`` the largest exponent does not round up into NaN."""
    from ...ops import bitwise

    def const(value):
        return _c(np.array(value, np.int32))

    bits = bitwise.bitcast(ew.cast(x, _dt.float32), _dt.int32)
    exponent = bitwise.bitwise_and(bitwise.bitshift(bits, const(23), "right"), const(0xFF))
    special = ew.eq(exponent, const(0xFF))
    if round_mode == "up":
        up = ew.gt(bitwise.bitwise_and(bits, const(0x7FFFFF)), const(0))
    elif round_mode == "nearest":
        guard = ew.gt(bitwise.bitwise_and(bits, const(0x400000)), const(0))
        rest = ew.logical_or(ew.gt(bitwise.bitwise_and(bits, const(0x3FFFFF)), const(0)), ew.gt(exponent, const(0)))
        up = ew.logical_and(guard, rest)
    elif round_mode == "down":
        up = None
    else:
        raise ValueError(f"round_mode must be up, down or nearest, got {round_mode!r}")
    if up is not None:
        up = ew.logical_and(up, ew.logical_not(special))
        if saturate:
            up = ew.logical_and(up, ew.ne(exponent, const(0xFE)))
        exponent = ew.add(exponent, ew.cast(up, _dt.int32))
    exponent = ew.where(special, const(0xFF), exponent)
    return bitwise.bitcast(ew.cast(exponent, _dt.uint8), _dt.float8_e8m0fnu)


def _c(array):
    from ._base import constant

    return constant(array)


def _saturate_to(x, dtype, saturate: bool = True):
    """Floating ``x`` cast to ``dtype``: integers rounded half to even and clamped to their
    range, float8 and float4 clamped to their largest finite value (unless ``saturate`` is off)."""
    if dtype is _dt.float8_e8m0fnu:
        return to_e8m0(x, saturate)
    if dtype in NARROW_FLOATS:
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
    if dtype in NARROW_FLOATS:
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
    if zero_point is not None and x.dtype not in NARROW_FLOATS:  # float8 and float4 zero points are zero
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


# the operands (input indices) of the ops that multiply quantized numbers
_QUANTIZED_OPERANDS = {"MatMulInteger": (0, 1), "ConvInteger": (0, 1), "QLinearMatMul": (0, 3),
                       "QLinearConv": (0, 3), "com.microsoft.MatMulIntegerToFloat": (0, 1),
                       "com.microsoft.QOrderedMatMul": (0, 2)}
# float ops a QDQ file quantizes by putting DequantizeLinear in front of their data and weight
_QDQ_OPERANDS = {"Conv": (0, 1), "ConvTranspose": (0, 1), "MatMul": (0, 1), "Gemm": (0, 1)}


def narrow_dtype(dtypes) -> str | None:
    """The dtype a product of these quantized operands runs in: ``int{bits}`` for integers
    (uint8 x int8 is an int8 GEMM, as hardware rates it), a float8 type for float8; None for
    anything else."""
    if any(d is None for d in dtypes):
        return None
    if all(d in _INTEGER for d in dtypes):
        return f"int{max(d.bits for d in dtypes)}"
    if all(d in _dt.FLOAT8 for d in dtypes):
        return max(dtypes, key=lambda d: d.bits).name
    return None


def mac_dtype(op_label: str, inputs: list, values: dict, dequantized: dict) -> str | None:
    """The dtype the MACs of an ONNX node run in when its inputs do not say it (None when they
    do): an integer GEMM's operand type, or the quantized type of a QDQ Conv/MatMul/Gemm's
    DequantizeLinear inputs. ``inputs`` are the node's input names, ``values`` the tensors by
    name, ``dequantized`` {DequantizeLinear output: its quantized input}."""
    def dtype_of(name):
        return values[name].dtype if name and name in values and values[name] is not None else None

    if op_label in _QUANTIZED_OPERANDS:
        return narrow_dtype([dtype_of(inputs[i]) if i < len(inputs) else None for i in _QUANTIZED_OPERANDS[op_label]])
    if op_label in _QDQ_OPERANDS:
        names = [inputs[i] if i < len(inputs) else "" for i in _QDQ_OPERANDS[op_label]]
        if all(n in dequantized for n in names):
            return narrow_dtype([dtype_of(dequantized[n]) for n in names])
    return None
