"""The table ``builtin op -> converter`` of the TFLite importer. A converter is
``fn(ctx, *inputs) -> Tensor``: ``inputs`` are runtime tensors (NHWC, as the file has them),
``ctx`` the op's records (shapes, quantization, options).

Convolutions and pooling reuse ONNX's converters, which take NCHW: the data is permuted to NCHW
and back around them (views), the weights from OHWI (depthwise 1HW(C*M)) to OIHW. Float ops run
as written. Quantized (int8) ops run as TFLite specifies: conv and fully connected layers in
integers (zero points subtracted, int32 accumulation, bias added, requantized in TFLite's fixed
point, clamped), ADD and SUB in its fixed point too; the other ops on the dequantized values,
quantized again to their output's scale and zero point (TFLite's int8 kernels for those use
lookup tables and fixed-point approximations: a value can land one unit apart).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from .. import dtypes as _dt
from ..onnx.converters._base import NodeContext
from ..onnx.converters.nn import avg_pool, conv, max_pool
from ..ops import activations as act
from ..ops import elementwise as ew
from ..ops import linalg, movement, reduction
from . import fixed_point
from . import quantized as q
from ..registry import registrar

CONVERTERS: dict[str, Callable] = {}
# ops whose MACs run in their weights' quantized type when the weight is int8 (with an int8
# input, or a float one the kernel quantizes on the fly: dynamic-range quantization)
WEIGHTED = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED")

_TO_NCHW, _TO_NHWC = (0, 3, 1, 2), (0, 2, 3, 1)


# ``@converter("CONV_2D", ...)``: the converter of each TFLite builtin op named
converter = registrar(CONVERTERS, "TFLite op", "a converter")


class OpContext:
    """One TFLite operator as its converter sees it."""

    def __init__(self, record, tensors: list):
        self.op = record.op
        self.index = record.index
        self.options = record.options
        self.ins = [tensors[i] if i >= 0 else None for i in record.inputs]
        self.outs = [tensors[i] for i in record.outputs]

    @property
    def where(self) -> str:
        return f"TFLite {self.op} operator {self.index}"

    @property
    def out(self):
        return self.outs[0]

    def quantized(self) -> bool:
        return q.is_quantized(self.ins[0]) and q.is_quantized(self.out)

    def onnx(self, **attrs) -> NodeContext:
        """A context for an ONNX converter, with the ONNX attributes that say the same."""
        return NodeContext(self.op, str(self.index), 21, attrs)

    def option(self, name: str, default=None):
        getter = getattr(self.options, name, None)
        return default if getter is None else getter()


# --- fused activations -------------------------------------------------------------------------

# ActivationFunctionType: NONE, RELU, RELU_N1_TO_1, RELU6, TANH (SIGN_BIT, 5, is not supported)
_ACTIVATIONS = {0: None, 1: act.relu, 2: lambda x: act.hardtanh(x, -1.0, 1.0), 3: act.relu6, 4: ew.tanh}


def _activated(ctx, y):
    """``y`` through the op's fused activation (float values)."""
    code = ctx.option("FusedActivationFunction", 0)
    if code not in _ACTIVATIONS:
        raise ValueError(f"fused activation {code} is not supported")
    fn = _ACTIVATIONS[code]
    return y if fn is None else fn(y)


def _tflite_round(value: float) -> int:
    """TfLiteRound: half away from zero."""
    return int(math.copysign(math.floor(abs(value) + 0.5), value))


def _clamp_quantized(ctx, y):
    """An int8 result clamped to the range its fused activation leaves (in quantized units)."""
    code = ctx.option("FusedActivationFunction", 0)
    bounds = {0: None, 1: (0.0, None), 2: (-1.0, 1.0), 3: (0.0, 6.0)}
    if code not in bounds:
        raise ValueError(f"fused activation {code} on a quantized {ctx.op} is not supported")
    if bounds[code] is None:
        return y
    scale, zero = float(ctx.out.quant.scale[0]), int(ctx.out.quant.zero_point[0])
    info = np.iinfo(np.dtype(ctx.out.dtype))
    low, high = bounds[code]
    lo = max(int(info.min), zero + _tflite_round(low / scale))
    hi = int(info.max) if high is None else min(int(info.max), zero + _tflite_round(high / scale))
    return ew.clamp(y, lo, hi)


def _float_then_quantized(fn):
    """A converter from a float one: quantized inputs dequantized, the result quantized again."""
    def convert(ctx, *inputs):
        if not q.is_quantized(ctx.out):
            return fn(ctx, *inputs)
        floats = [q.dequantize(x, r) if q.is_quantized(r) else x for x, r in zip(inputs, ctx.ins)]
        return q.quantize(fn(ctx, *floats), ctx.out)

    convert.__name__ = fn.__name__
    return convert


# --- convolutions and fully connected layers ---------------------------------------------------

def _padding(ctx) -> str:
    return "SAME_UPPER" if ctx.option("Padding", 0) == 0 else "VALID"  # Padding.SAME is 0


def _conv_nhwc(ctx, x, w_oihw, bias, groups: int):
    attrs = {"strides": [ctx.option("StrideH", 1), ctx.option("StrideW", 1)],
             "dilations": [ctx.option("DilationHFactor", 1), ctx.option("DilationWFactor", 1)],
             "auto_pad": _padding(ctx), "group": groups}
    if _hybrid(ctx):
        values, row_scale = _asymmetric_rows(x, (1, 2, 3))
        acc = conv(ctx.onnx(**attrs), movement.permute(values, _TO_NCHW), ew.cast(w_oihw, _dt.float64))
        return _hybrid_output(ctx, movement.permute(acc, _TO_NHWC), row_scale, bias)
    if not ctx.quantized():
        y = conv(ctx.onnx(**attrs), movement.permute(x, _TO_NCHW), w_oihw, bias)
        return _activated(ctx, movement.permute(y, _TO_NHWC))
    xs = q.minus_zero_point(movement.permute(x, _TO_NCHW), ctx.ins[0])
    ws = q.minus_zero_point(w_oihw, ctx.ins[1])
    acc = conv(ctx.onnx(**attrs), xs, ws, None if bias is None else ew.cast(bias, _dt.float64))
    y = q.requantize(movement.permute(acc, _TO_NHWC), ctx.ins[0], ctx.ins[1], ctx.out)
    return _clamp_quantized(ctx, y)


def _hybrid(ctx) -> bool:
    """A dynamic-range quantized layer: float input, int8 weight with a scale."""
    return not q.is_quantized(ctx.ins[0]) and q.is_quantized(ctx.ins[1])


def _quantized_rows(x, dims: tuple):
    """A hybrid layer's float input quantized as TFLite's kernels do on the fly: symmetric int8
    per batch row (the largest magnitude over ``dims`` is 127), rounded half away from zero;
    (the int8 values in float64, the float32 scale, keeping ``dims``)."""
    largest = reduction.amax(ew.abs(x), dims, keepdim=True)
    largest = ew.where(ew.eq(largest, 0.0), 1.0, largest)  # an all-zero row quantizes to zeros
    values = ew.clamp(_round_half_away(ew.mul(x, ew.div(127.0, largest))), -127.0, 127.0)
    return ew.cast(values, _dt.float64), ew.div(largest, 127.0)


def _asymmetric_rows(x, dims: tuple):
    """A hybrid conv's float input quantized as TFLite's per-channel hybrid kernels do: int8 per
    batch item over [min(x, 0), max(x, 0)] with the zero point of smaller error, nudged into
    range; (the values minus the zero point in float64 -- padding then adds real zeros -- and the
    float32 scale, keeping ``dims``)."""
    low = ew.minimum(reduction.amin(x, dims, keepdim=True), 0.0)
    high = ew.maximum(reduction.amax(x, dims, keepdim=True), 0.0)
    low, high = ew.cast(low, _dt.float64), ew.cast(high, _dt.float64)
    flat = ew.eq(low, high)
    scale = ew.div(ew.where(flat, 255.0, ew.sub(high, low)), 255.0)  # a constant-zero item: scale 1
    from_min, from_max = ew.sub(-128.0, ew.div(low, scale)), ew.sub(127.0, ew.div(high, scale))
    min_error = ew.add(128.0, ew.abs(ew.div(low, scale)))
    max_error = ew.add(127.0, ew.abs(ew.div(high, scale)))
    zero = ew.where(ew.lt(min_error, max_error), from_min, from_max)
    zero = ew.where(flat, 0.0, ew.clamp(_round_half_away(zero), -128.0, 127.0))
    scale = ew.cast(scale, _dt.float32)
    inverse = ew.div(1.0, scale)
    values = ew.clamp(_round_half_away(ew.add(ew.cast(zero, _dt.float32), ew.mul(x, inverse))), -128.0, 127.0)
    values = ew.sub(ew.cast(values, _dt.float64), zero)
    return ew.where(flat, 0.0, values), scale


def _hybrid_output(ctx, acc, row_scale, bias):
    """acc * input scale * weight scale (per output channel, channels last) + the float bias."""
    w_scale = q.scale_of(ctx.ins[1])
    y = ew.mul(ew.cast(acc, _dt.float32), ew.mul(row_scale, w_scale))
    return _activated(ctx, y if bias is None else ew.add(y, bias))


@converter("CONV_2D")
def conv_2d(ctx, x, w, bias=None):
    groups = x.shape[3] // w.shape[3] if w.shape[3] else 1  # grouped convs: filter depth < input depth
    return _conv_nhwc(ctx, x, movement.permute(w, (0, 3, 1, 2)), bias, groups)


@converter("DEPTHWISE_CONV_2D")
def depthwise_conv_2d(ctx, x, w, bias=None):
    # filter (1, H, W, C * M): output channel c * M + m reads input channel c
    return _conv_nhwc(ctx, x, movement.permute(w, (3, 0, 1, 2)), bias, x.shape[3])


@converter("FULLY_CONNECTED")
def fully_connected(ctx, x, w, bias=None):
    depth = w.shape[1]
    rows = movement.reshape(x, (-1, depth))
    if _hybrid(ctx):
        values, row_scale = _quantized_rows(rows, (1,))
        acc = linalg.linear(values, ew.cast(w, _dt.float64))
        return movement.reshape(_hybrid_output(ctx, acc, row_scale, bias), ctx.out.shape)
    if not ctx.quantized():
        return _activated(ctx, movement.reshape(linalg.linear(rows, w, bias), ctx.out.shape))
    acc = linalg.linear(q.minus_zero_point(rows, ctx.ins[0]), q.minus_zero_point(w, ctx.ins[1]),
                        None if bias is None else ew.cast(bias, _dt.float64))
    y = q.requantize(acc, ctx.ins[0], ctx.ins[1], ctx.out)
    return _clamp_quantized(ctx, movement.reshape(y, ctx.out.shape))


# --- pooling -----------------------------------------------------------------------------------

def _pool(ctx, x, onnx_pool):
    attrs = {"kernel_shape": [ctx.option("FilterHeight", 1), ctx.option("FilterWidth", 1)],
             "strides": [ctx.option("StrideH", 1), ctx.option("StrideW", 1)], "auto_pad": _padding(ctx)}
    y = onnx_pool(ctx.onnx(**attrs), movement.permute(x, _TO_NCHW))
    return movement.permute(y, _TO_NHWC)


@converter("MAX_POOL_2D")
def max_pool_2d(ctx, x):
    if not ctx.quantized():
        return _activated(ctx, _pool(ctx, x, max_pool))
    # the largest quantized value is the largest value (input and output share their scale)
    y = ew.cast(_pool(ctx, ew.cast(x, _dt.float32), max_pool), x.dtype)
    return _clamp_quantized(ctx, y)


@converter("AVERAGE_POOL_2D")
def average_pool_2d(ctx, x):
    if not ctx.quantized():
        return _activated(ctx, _pool(ctx, x, avg_pool))
    # TFLite: the int32 sum over the window's valid values divided by their count, rounded half away
    mean = _pool(ctx, ew.cast(x, _dt.float32), avg_pool)
    return _clamp_quantized(ctx, ew.cast(_round_half_away(mean), x.dtype))


# --- elementwise -------------------------------------------------------------------------------

def _round_half_away(x):
    """Rounding as TFLite's fixed-point arithmetic does it: half away from zero."""
    return ew.mul(ew.sign(x), ew.floor(ew.add(ew.abs(x), 0.5)))


_ADD_LEFT_SHIFT = 20  # TFLite's int8 ADD and SUB scale their operands up by 2**20 first


def _quantized_add(ctx, a, b, subtract: bool):
    """int8 ADD/SUB as TFLite's kernels compute them, in int64 fixed point (``fixed_point.py``):
    each operand minus its zero point, times 2**20, scaled by its scale / (2 * the larger input
    scale); the sum scaled by that / (2**20 * the output scale), plus the output's zero point,
    clamped to int8 and to the fused activation's range."""
    (ra, rb), out = ctx.ins, ctx.out
    sa, sb, so = float(ra.quant.scale[0]), float(rb.quant.scale[0]), float(out.quant.scale[0])
    twice_max = 2 * max(sa, sb)

    def scaled(x, record, scale):
        shifted = ew.mul(ew.sub(ew.cast(x, _dt.int64), int(record.quant.zero_point[0])), 2 ** _ADD_LEFT_SHIFT)
        return fixed_point.multiply_by_quantized_multiplier(shifted, *fixed_point.quantize_multiplier(scale / twice_max))

    left, right = scaled(a, ra, sa), scaled(b, rb, sb)
    total = ew.sub(left, right) if subtract else ew.add(left, right)
    factor = fixed_point.quantize_multiplier(twice_max / (2 ** _ADD_LEFT_SHIFT * so))
    y = fixed_point.multiply_by_quantized_multiplier(total, *factor, int(out.quant.zero_point[0]),
                                                     _dt.get_dtype(out.dtype))
    return _clamp_quantized(ctx, y)


def _add_or_sub(ctx, a, b, subtract: bool):
    if ctx.quantized() and q.is_quantized(ctx.ins[1]) and all(r.quant.per_tensor for r in ctx.ins + ctx.outs):
        return _quantized_add(ctx, a, b, subtract)
    return _float_then_quantized(lambda ctx, a, b: _activated(ctx, (ew.sub if subtract else ew.add)(a, b)))(ctx, a, b)


@converter("ADD")
def add(ctx, a, b):
    return _add_or_sub(ctx, a, b, subtract=False)


@converter("SUB")
def sub(ctx, a, b):
    return _add_or_sub(ctx, a, b, subtract=True)


@converter("MUL")
@_float_then_quantized
def mul(ctx, a, b):
    return _activated(ctx, ew.mul(a, b))


def _unary(fn):
    return _float_then_quantized(lambda ctx, x: fn(x))


for _name, _fn in {"RELU": act.relu, "RELU6": act.relu6, "RELU_N1_TO_1": lambda x: act.hardtanh(x, -1.0, 1.0),
                   "LOGISTIC": act.sigmoid, "TANH": ew.tanh, "HARD_SWISH": act.hardswish}.items():
    converter(_name)(_unary(_fn))


@converter("SOFTMAX")
@_float_then_quantized
def softmax(ctx, x):
    beta = ctx.option("Beta", 1.0)
    return act.softmax(x if beta == 1.0 else ew.mul(x, float(beta)), dim=-1)


# --- shapes ------------------------------------------------------------------------------------

@converter("RESHAPE", "SQUEEZE", "EXPAND_DIMS")
def reshape(ctx, x, *_shape):
    # the output's shape is declared in the file; a new shape input, if any, says the same
    y = movement.reshape(x, ctx.out.shape)
    if q.is_quantized(ctx.ins[0]) and q.is_quantized(ctx.out) and not _same_quantization(ctx.ins[0], ctx.out):
        return q.quantize(q.dequantize(y, ctx.ins[0]), ctx.out)
    return y


def _same_quantization(a, b) -> bool:
    return (a.quant is None) == (b.quant is None) and (
        a.quant is None or (np.array_equal(a.quant.scale, b.quant.scale)
                            and np.array_equal(a.quant.zero_point, b.quant.zero_point)))


@converter("CONCATENATION")
def concatenation(ctx, *xs):
    axis = ctx.option("Axis", 0)
    if q.is_quantized(ctx.out):
        # inputs at another scale or zero point are requantized to the output's first
        xs = [x if _same_quantization(r, ctx.out) else q.quantize(q.dequantize(x, r), ctx.out)
              for x, r in zip(xs, ctx.ins)]
        return _clamp_quantized(ctx, movement.cat(list(xs), dim=axis))
    return _activated(ctx, movement.cat(list(xs), dim=axis))


@converter("PAD", "PADV2")
def pad(ctx, x, paddings, value=None):
    pairs = np.asarray(paddings.data).reshape(-1, 2) if paddings.data is not None else None
    if pairs is None:
        raise ValueError("the paddings are not a constant of the file")
    fill = 0.0
    if value is not None and value.data is not None:
        fill = float(np.asarray(value.data).reshape(-1)[0])
    elif q.is_quantized(ctx.ins[0]):
        fill = float(ctx.ins[0].quant.zero_point[0])  # real zero
    return movement.pad(x, movement.pad_list(pairs.tolist()), value=fill)


# --- quantization ------------------------------------------------------------------------------

@converter("QUANTIZE")
def quantize(ctx, x):
    if q.is_quantized(ctx.ins[0]):  # requantize to another scale, zero point or type
        x = q.dequantize(x, ctx.ins[0])
    return q.quantize(x, ctx.out)


@converter("DEQUANTIZE")
def dequantize(ctx, x):
    if not q.is_quantized(ctx.ins[0]):  # a float16 weight made float32
        return ew.cast(x, _dt.get_dtype(ctx.out.dtype))
    y = q.dequantize(x, ctx.ins[0])
    return y if ctx.out.dtype == "float32" else ew.cast(y, _dt.get_dtype(ctx.out.dtype))
