"""TFLite's affine quantization on the runtime's ops, reusing ONNX's quantization converters
(the arithmetic is the same: real = scale * (q - zero_point)).

* ``dequantize`` and ``quantize`` are ONNX's DequantizeLinear and QuantizeLinear (round half to
  even; TFLite's reference rounds half away from zero, which differs only on exact halves);
* ``requantize`` turns an int32 accumulator (a conv's or a fully connected layer's, computed
  exactly in float64) into the output's int8 with the factor input scale * weight scale /
  output scale, held and applied in TFLite's fixed point (``fixed_point.py``).
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as _dt
from ..onnx.converters._base import NodeContext, constant
from ..onnx.converters.quantized import dequantize_linear, quantize_linear
from ..ops import elementwise as ew
from . import fixed_point


def _ctx(axis: int) -> NodeContext:
    return NodeContext("TFLite quantization", "", 21, {"axis": axis})


def scale_of(record):
    """The record's scale as a constant: a scalar, or (per axis) a vector."""
    q = record.quant
    if q.per_tensor:
        return constant(np.float32(q.scale[0]))
    return constant(q.scale.astype(np.float32))


def zero_point_of(record):
    """The record's zero point as a constant of its dtype (a scalar when per tensor)."""
    q, dtype = record.quant, np.dtype(record.dtype)
    zero = q.zero_point.astype(dtype)
    return constant(zero[0] if zero.size == 1 else zero)


def dequantize(x, record):
    """``x`` (the quantized values of ``record``) as float32."""
    q = record.quant
    return dequantize_linear(_ctx(q.axis), x, scale_of(record), zero_point_of(record))


def quantize(x, record):
    """Float ``x`` quantized to ``record``'s type, scale and zero point."""
    q = record.quant
    return quantize_linear(_ctx(q.axis), x, scale_of(record), zero_point_of(record))


def requantize(acc, input_record, weight_record, output_record):
    """An accumulator (float64 holding int32 values, channels last) as ``output_record``'s int8:
    times input scale * weight scale / output scale (one per output channel for per-channel
    weights) in TFLite's fixed point, plus the output's zero point, clamped."""
    factor = (np.float64(input_record.quant.scale[0]) * weight_record.quant.scale.astype(np.float64)
              / np.float64(output_record.quant.scale[0]))
    return fixed_point.multiply_by_quantized_multiplier(acc, *fixed_point.quantize_multiplier(factor),
                                                        int(output_record.quant.zero_point[0]),
                                                        _dt.get_dtype(output_record.dtype))


def minus_zero_point(x, record):
    """``q - zero_point`` in float64 (exact for 8- and 16-bit values): a product's operand."""
    x = ew.cast(x, _dt.float64)
    zero = record.quant.zero_point if record.quant is not None else np.zeros(1)
    if not np.any(zero):
        return x
    return ew.sub(x, constant(np.float64(zero[0]) if zero.size == 1 else zero.astype(np.float64)))


def is_quantized(record) -> bool:
    """An integer tensor with a scale: its values stand for scale * (q - zero_point)."""
    return record is not None and record.quant is not None and np.dtype(record.dtype).kind in "iu"
