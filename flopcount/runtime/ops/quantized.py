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
"""

from __future__ import annotations

__all__ = ["dequantize", "quantized_linear"]

from math import prod

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


@register_op("quantized_linear")
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
