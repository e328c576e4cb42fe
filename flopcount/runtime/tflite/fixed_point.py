"""TFLite's fixed-point requantization (``MultiplyByQuantizedMultiplier`` in its reference
kernels): a real factor held as a 31-bit multiplier and a power of two, applied to int32 values
by the runtime's ``requantize`` op (a rounding doubling high multiply, then a rounding right
shift). An imported int8 model so rounds where LiteRT does (convs, fully connected layers, ADD
and SUB).

The op is counted as the requantization it stands for, not as the integer steps that round it
exactly: multiplying by the factor and rounding is 2 FLOPs an element; adding the output's zero
point and saturating to int8 1 each (``ops/quantized.py``). A conv's int8 epilogue is then 4
FLOPs an output element, as an ONNX QLinearConv's rescale is.

    multiplier, shift = quantize_multiplier(np.array([0.3]))   # [1288490189], [-1]
    y = multiply_by_quantized_multiplier(acc, multiplier, shift)   # acc: int64 tensor, channels last
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as _dt
from ..onnx.converters._base import constant
from ..ops.quantized import requantize


def quantize_multiplier(real) -> tuple[np.ndarray, np.ndarray]:
    """Each factor of ``real`` as (a multiplier in [2**30, 2**31), a shift):
    real = multiplier / 2**31 * 2**shift (TFLite's QuantizeMultiplier; 0 for a zero factor)."""
    real = np.atleast_1d(np.asarray(real, np.float64))
    fraction, shift = np.frexp(real)
    multiplier = np.floor(fraction * 2.0 ** 31 + 0.5).astype(np.int64)  # std::round, half away (fraction > 0)
    carry = multiplier == 2 ** 31
    multiplier = np.where(carry, multiplier // 2, multiplier)
    shift = np.where(carry, shift + 1, shift).astype(np.int64)
    tiny = (shift < -31) | (real == 0)
    return np.where(tiny, 0, multiplier), np.where(tiny, 0, shift)


def multiply_by_quantized_multiplier(x, multiplier: np.ndarray, shift: np.ndarray, zero_point: int | None = None,
                                     dtype=_dt.int64):
    """A tensor of int32 values (int64, or float64 holding them) times the factors ``(multiplier,
    shift)`` stand for (one, or one per index of the last dim), rounded as TFLite rounds them;
    plus ``zero_point`` and saturated to ``dtype`` when they are given."""
    return requantize(x, constant(np.asarray(multiplier, np.int64)), constant(np.asarray(shift, np.int64)),
                      zero_point, dtype)
