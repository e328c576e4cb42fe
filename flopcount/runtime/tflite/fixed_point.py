"""TFLite's fixed-point requantization (``MultiplyByQuantizedMultiplier`` in its reference
kernels), on the runtime's int64 ops: a real factor held as a 31-bit multiplier and a power of
two, a rounding doubling high multiply, then a rounding right shift. An imported int8 model so
rounds where LiteRT does (convs, fully connected layers, ADD and SUB).

    multiplier, shift = quantize_multiplier(np.array([0.3]))   # [1288490189], [-1]
    y = multiply_by_quantized_multiplier(acc, multiplier, shift)   # acc: int64 tensor, channels last
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as _dt
from ..onnx.converters._base import constant
from ..ops import elementwise as ew


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


def _value(array: np.ndarray):
    """A per-channel int64 constant, or a Python int for a single value."""
    return int(array[0]) if array.size == 1 else constant(array.astype(np.int64))


def _truncating_divide(x, power: int):
    """``x / power`` rounded toward zero, as C++ divides integers (exact in int64: a division
    through float64 would round products above 2**53)."""
    down = ew.floor_divide(x, power)
    up = ew.neg(ew.floor_divide(ew.neg(x), power))
    return ew.where(ew.ge(x, 0), down, up)


def _rounding_divide_by_pot(x, exponent: np.ndarray):
    """``x / 2**exponent`` rounded half away from zero (gemmlowp's RoundingDivideByPOT)."""
    if not np.any(exponent):
        return x
    power = 2 ** exponent
    floor = ew.floor_divide(x, _value(power))
    remainder = ew.sub(x, ew.mul(floor, _value(power)))
    threshold = ew.add(ew.cast(ew.lt(x, 0), _dt.int64), _value((power - 1) >> 1))
    return ew.add(floor, ew.cast(ew.gt(remainder, threshold), _dt.int64))


def multiply_by_quantized_multiplier(x, multiplier: np.ndarray, shift: np.ndarray):
    """An int64 tensor of int32 values times the factors ``(multiplier, shift)`` stand for (one,
    or one per index of the last dim), rounded as TFLite rounds them."""
    left = np.maximum(shift, 0)
    if np.any(left):
        x = ew.mul(x, _value(2 ** left))
    product = ew.mul(x, _value(multiplier))
    nudge = ew.where(ew.ge(product, 0), 1 << 30, 1 - (1 << 30))
    high = _truncating_divide(ew.add(product, nudge), 2 ** 31)
    return _rounding_divide_by_pot(high, np.maximum(-shift, 0))
