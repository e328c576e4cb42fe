"""Bitwise ops on integer (and bool) tensors: and, or, xor, not, shifts, and ``bitcast`` (the
same bits read as another type of the same width).

Cost (COUNTING.md): 1 FLOP per output element each, as the other elementwise ops (an integer
operation counts like a floating one: the column counts arithmetic, whatever its type);
bitcast, a reinterpretation, none.
"""

from __future__ import annotations

__all__ = ["bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "bitshift", "bitcast"]

from ..dispatch import apply
from ..errors import ShapeError
from .. import dtypes as _dt
from ..registry import Op, Spec, io_cost, no_cost, numel, register_op
from ._helpers import broadcast_shapes, operands


def _check_integer(op: str, *tensors) -> None:
    for t in tensors:
        if t.dtype.is_floating_point:
            raise ShapeError(f"{op}: expects integer or bool tensors, got {t.dtype.name} of shape {t.shape}")


def _binary(name: str, np_name: str, onnx: str):
    @register_op(name, onnx=onnx)
    class Bitwise(Op):
        vjp = None  # integer arithmetic: nothing to differentiate

        def shape(a, b):
            _check_integer(name, a, b)
            if a.dtype is not b.dtype:
                raise ShapeError(f"{name}: operands need one dtype, got {a.dtype.name} and {b.dtype.name}")
            return Spec(broadcast_shapes(name, a.shape, b.shape), a.dtype, a.device)

        def forward(xp, a, b):
            return getattr(xp, np_name)(a, b)

        def cost(out, a, b):
            return io_cost(out, (a, b), flops=numel(out))

    Bitwise.__name__ = Bitwise.__qualname__ = "".join(p.title() for p in name.split("_"))
    return Bitwise


BitwiseAnd = _binary("bitwise_and", "bitwise_and", "BitwiseAnd")
BitwiseOr = _binary("bitwise_or", "bitwise_or", "BitwiseOr")
BitwiseXor = _binary("bitwise_xor", "bitwise_xor", "BitwiseXor")


@register_op("bitwise_not", onnx="BitwiseNot")
class BitwiseNot(Op):
    vjp = None  # integer arithmetic

    def shape(x):
        _check_integer("bitwise_not", x)
        return Spec(x.shape, x.dtype, x.device)

    def forward(xp, x):
        return xp.invert(x)

    def cost(out, x):
        return io_cost(out, (x,), flops=numel(out))


@register_op("bitshift")
class BitShift(Op):
    """``a << b`` (``direction="left"``) or ``a >> b``, on unsigned integers as ONNX's BitShift;
    bits shifted out are lost."""

    vjp = None  # integer arithmetic

    def shape(a, b, *, direction):
        _check_integer("bitshift", a, b)
        if direction not in ("left", "right"):
            raise ShapeError(f"bitshift: direction must be 'left' or 'right', got {direction!r}")
        if a.dtype is not b.dtype:
            raise ShapeError(f"bitshift: operands need one dtype, got {a.dtype.name} and {b.dtype.name}")
        return Spec(broadcast_shapes("bitshift", a.shape, b.shape), a.dtype, a.device)

    def forward(xp, a, b, *, direction):
        fn = xp.left_shift if direction == "left" else xp.right_shift
        return fn(a, b).astype(a.dtype, copy=False)

    def cost(out, a, b, *, direction):
        return io_cost(out, (a, b), flops=numel(out))


@register_op("bitcast")
class BitCast(Op):
    """The bits of ``x`` read as ``dtype`` (of the same width): a view, as numpy's ``view``."""

    vjp = None  # a reinterpretation of bits has no derivative

    def shape(x, *, dtype):
        target = _dt.get_dtype(dtype)
        if target.itemsize != x.dtype.itemsize:
            raise ShapeError(f"bitcast: {x.dtype.name} ({8 * x.dtype.itemsize} bits) and {target.name} "
                             f"({8 * target.itemsize} bits) differ in width")
        return Spec(x.shape, target, x.device)

    def forward(xp, x, *, dtype):
        return x.view(_dt.get_dtype(dtype).np)

    cost = no_cost  # no arithmetic, nothing copied


def bitcast(x, dtype):
    """The bits of ``x`` as ``dtype`` (the same width).

    >>> bitcast(rt.tensor([1.0]), "int32").tolist()
    [1065353216]
    """
    return apply(BitCast, x, dtype=_dt.get_dtype(dtype).name)


def bitwise_and(a, b):
    """Elementwise ``a & b``.

    >>> bitwise_and(rt.tensor([6]), rt.tensor([3])).tolist()
    [2]
    """
    return apply(BitwiseAnd, *operands("bitwise_and", a, b))


def bitwise_or(a, b):
    """Elementwise ``a | b``."""
    return apply(BitwiseOr, *operands("bitwise_or", a, b))


def bitwise_xor(a, b):
    """Elementwise ``a ^ b``."""
    return apply(BitwiseXor, *operands("bitwise_xor", a, b))


def bitwise_not(x):
    """Elementwise ``~x``."""
    return apply(BitwiseNot, x)


def bitshift(a, b, direction: str):
    """``a << b`` or ``a >> b`` (``direction`` "left" or "right")."""
    return apply(BitShift, *operands("bitshift", a, b), direction=direction)


