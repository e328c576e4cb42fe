"""Weights stored in a narrow type with block scales: dequantize, and a linear layer over them.

A quantized weight is ``q`` (out, in) in int8, int4/uint4 or a float8 type, with ``scale``
(out or 1, in / group) in a floating type: element (o, i) stands for ``q[o, i] * scale[o, i //
group]``, where ``group = in / scale.shape[1]`` (one scale per row: per output channel; a
(1, 1) scale: per tensor). Symmetric, as AWQ/GPTQ-style int4 kernels and FP8 serving store it
without zero points. Or ``q`` is in a block format (``dtypes.BlockDType``: GGUF's Q4_K, Q6_K,
IQ2_XXS...), whose scales sit inside its blocks, and ``scale`` is None.

``quantized_linear`` is what fused weight-only kernels (W4A16, W8A16, FP8 weights) do: read the
narrow weight and its scales, dequantize in registers, multiply in the activations' dtype. Its
cost reads the weight at its element size (4 bits for int4: ``DType.bits``) plus the scales, so
int4 weights with a float16 scale per 128 cost 4.125 bits each (a block format: its bytes, Q4_K
4.5 bits a weight); MACs are those of the linear
layer, and one FLOP per weight element dequantizes it.

``requantize`` is the epilogue of an integer conv or GEMM (TFLite's int8 kernels, gemmlowp):
the int32 accumulator times a real factor held in fixed point (a 31-bit multiplier and a power
of two), rounded, plus the output's zero point, saturated to the output type. It is one op, and
counted as the arithmetic it stands for on real numbers (multiply by the factor, round, add the
zero point, clamp: the four FLOPs an ONNX QLinearConv's rescale counts per element), not as the
dozen-odd integer steps that carry out the rounding exactly.
"""

from __future__ import annotations

__all__ = ["dequantize", "quantized_linear", "requantize"]

from math import prod

import numpy as np

from .. import dtypes as _dt
from ..dispatch import apply
from ..errors import ShapeError
from ..registry import Op, Spec, io_cost, numel, register_op
from .linalg import gemm, matmul

QUANTIZED_DTYPES = (_dt.int8, _dt.int4, _dt.uint4) + _dt.FLOAT8


def _check_weight(op: str, q, scale) -> None:
    if isinstance(q.dtype, _dt.BlockDType):
        if q.ndim != 2 or scale is not None:
            raise ShapeError(f"{op}: a {q.dtype.name} weight is 2-d with its scales in its blocks, got shape "
                             f"{q.shape} and a scale {None if scale is None else scale.shape}")
        q.dtype.row_bytes(q.shape[1])   # whole blocks, or a ShapeError saying so
        return
    if scale is None:
        raise ShapeError(f"{op}: a {q.dtype.name} weight needs its scale")
    if q.ndim != 2 or scale.ndim != 2:
        raise ShapeError(f"{op}: weight {q.shape} and scale {scale.shape} must be 2-d")
    if q.dtype not in QUANTIZED_DTYPES:
        raise ShapeError(f"{op}: weight dtype {q.dtype.name} is not a quantized type "
                         f"({', '.join(d.name for d in QUANTIZED_DTYPES)})")
    if not scale.dtype.is_floating_point:
        raise ShapeError(f"{op}: scale must be floating, got {scale.dtype.name}")
    out, cols = q.shape
    if scale.shape[0] not in (1, out) or scale.shape[1] < 1 or cols % scale.shape[1]:
        raise ShapeError(f"{op}: scale {scale.shape} does not divide weight {q.shape} into groups "
                         f"(expects ({out} or 1, {cols} / group size))")


def _dequantized(xp, q, scale, block_format=None):
    """float32 ``q`` times its block scales (the dispatcher has widened both already); the raw
    bytes of a block format (named by ``block_format``) decoded by it."""
    if block_format is not None:
        return xp.asarray(_dt.get_dtype(block_format).decoded(q))
    out, cols = q.shape
    groups = scale.shape[1]
    w = q.astype("float32").reshape(out, groups, cols // groups) * scale.astype("float32")[:, :, None]
    return w.reshape(out, cols)


@register_op("dequantize")
class Dequantize(Op):
    """The full-precision weight of ``q`` and ``scale``, in ``dtype``."""

    def shape(q, scale, *, dtype, block_format=None):
        _check_weight("dequantize", q, scale)
        return Spec(tuple(q.shape), _dt.get_dtype(dtype), q.device)

    def forward(xp, q, scale, *, dtype, block_format=None):
        return _dequantized(xp, q, scale, block_format)

    vjp = None  # quantized weights are frozen: nothing upstream of them learns

    def cost(out, q, scale, *, dtype, block_format=None):
        return io_cost(out, (q, scale), flops=numel(q))  # one multiply per weight


@register_op("quantized_linear", ptflops="quantized_linear")
class QuantizedLinear(Op):
    """x (..., in) @ (q · scale)ᵀ + bias, dequantizing inside the GEMM (nothing materialized)."""

    def shape(x, q, scale, bias=None, *, block_format=None):
        _check_weight("quantized_linear", q, scale)
        if x.ndim < 1 or x.shape[-1] != q.shape[1]:
            raise ShapeError(f"quantized_linear: input {x.shape} does not fit weight {q.shape} "
                             f"(expects (..., {q.shape[1]}))")
        if not x.dtype.is_floating_point:
            raise ShapeError(f"quantized_linear: input must be floating, got {x.dtype.name}")
        if bias is not None and tuple(bias.shape) != (q.shape[0],):
            raise ShapeError(f"quantized_linear: bias {bias.shape} does not fit weight {q.shape}")
        return Spec(x.shape[:-1] + (q.shape[0],), x.dtype, x.device)

    def forward(xp, x, q, scale, bias=None, *, block_format=None):
        out = gemm(xp, x, _dequantized(xp, q, scale, block_format).T)
        if bias is not None:
            out += bias
        return out

    def vjp(g, out, x, q, scale, bias=None, *, block_format=None):
        from .reduction import sum as reduce_sum

        gx = matmul(g, dequantize(q, scale, g.dtype)) if x.requires_grad else None
        gb = reduce_sum(g, tuple(range(g.ndim - 1))) if bias is not None and bias.requires_grad else None
        return gx, None, None, gb

    def cost(out, x, q, scale, bias=None, *, block_format=None):
        macs = prod(x.shape[:-1]) * q.shape[1] * q.shape[0]
        flops = 2 * macs + numel(q) + (numel(out) if bias is not None else 0)
        return io_cost(out, (x, q, scale, bias), macs=macs, flops=flops)


@register_op("requantize", ptflops="numel_out")
class Requantize(Op):
    """``x`` (integer values, channels last) times the factors ``multiplier / 2**31 * 2**shift``
    (one, or one per index of the last dim) rounded as TFLite's MultiplyByQuantizedMultiplier
    rounds, plus ``zero_point``, saturated to ``dtype``."""

    def shape(x, multiplier, shift, *, zero_point=None, dtype="int64"):
        for name, factor in (("multiplier", multiplier), ("shift", shift)):
            if factor.dtype is not _dt.int64 or factor.numel() not in (1, x.shape[-1] if x.ndim else 1):
                raise ShapeError(f"requantize: {name} must be int64 with one value or one per channel "
                                 f"({x.shape[-1] if x.ndim else 1}), got {factor.dtype.name} {factor.shape}")
        out = _dt.get_dtype(dtype)
        if out.is_floating_point or out is _dt.bool_:
            raise ShapeError(f"requantize: the output must be an integer type, got {out.name}")
        return Spec(tuple(x.shape), out, x.device)

    def forward(xp, x, multiplier, shift, *, zero_point=None, dtype="int64"):
        y = _multiply_by_quantized_multiplier(xp, x.astype(np.int64), multiplier.reshape(-1), shift.reshape(-1))
        if zero_point is not None:
            y += zero_point
        out = _dt.get_dtype(dtype).np
        info = np.iinfo(out)
        return xp.clip(y, info.min, info.max).astype(out)

    vjp = None  # integer arithmetic: nothing to differentiate

    def cost(out, x, multiplier, shift, *, zero_point=None, dtype="int64"):
        # multiply by the factor and round; add the zero point; clamp to a narrower type
        per_element = 2 + (zero_point is not None) + (_dt.get_dtype(dtype) is not _dt.int64)
        return io_cost(out, (x, multiplier, shift), flops=per_element * numel(out))


def _multiply_by_quantized_multiplier(xp, x, multiplier, shift):
    """TFLite's MultiplyByQuantizedMultiplier on int64 arrays of int32 values: a left shift, the
    rounding doubling high multiply (gemmlowp's SaturatingRoundingDoublingHighMul, which
    saturates only for two int32 minimums: not a real factor), then RoundingDivideByPOT."""
    x = x * (1 << xp.maximum(shift, 0))
    product = x * multiplier
    product += xp.where(product >= 0, 1 << 30, 1 - (1 << 30))
    high = xp.sign(product) * (xp.abs(product) >> 31)  # divided by 2**31 toward zero, as C++ divides
    exponent = xp.maximum(-shift, 0)
    mask = (1 << exponent) - 1
    threshold = (mask >> 1) + (high < 0)
    return (high >> exponent) + ((high & mask) > threshold)


# --- functional API ----------------------------------------------------------------------------

def dequantize(q, scale, dtype=_dt.float32):
    """``q`` (out, in) times its block scales ``scale`` (out or 1, in / group), in ``dtype``; a
    block format's ``q`` (scale None) decoded."""
    return apply(Dequantize, q, scale, dtype=_dt.get_dtype(dtype).name, **_block_format(q))


def quantized_linear(x, q, scale, bias=None):
    """``linear(x, dequantize(q, scale), bias)`` as one op, in ``x``'s dtype."""
    return apply(QuantizedLinear, x, q, scale, bias, **_block_format(q))


def _block_format(q) -> dict:
    # the kernel sees arrays only: a block format's name tells it how to decode the raw bytes
    return {"block_format": q.dtype.name} if isinstance(q.dtype, _dt.BlockDType) else {}


def requantize(x, multiplier, shift, zero_point: int | None = None, dtype=_dt.int64):
    """``x`` (an integer accumulator, or float64 holding one) times the real factors that
    ``multiplier`` and ``shift`` (int64 tensors: one value, or one per channel of the last dim)
    stand for, in TFLite's fixed point, plus ``zero_point``, saturated to ``dtype``.

    >>> import flopcount.runtime as rt
    >>> m, s = rt.tensor([1288490189]), rt.tensor([-1])   # 0.3 = 1288490189 / 2**31 * 2**-1
    >>> rt.nn.functional.requantize(rt.tensor([10, -10, 100]), m, s, zero_point=3, dtype=rt.int8).tolist()
    [6, 0, 33]
    """
    zero_point = None if zero_point is None else int(zero_point)
    return apply(Requantize, x, multiplier, shift, zero_point=zero_point, dtype=_dt.get_dtype(dtype).name)
