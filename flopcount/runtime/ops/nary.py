"""N-ary elementwise ops: the sum, maximum, minimum and mean of any number of tensors (ONNX's
Sum, Max, Min and Mean). One op rather than a chain of binary ones: a Sum of 100,000 inputs is
one graph node, one report row and one output buffer, instead of 99,999 of each.

Shape: every input broadcasts with every other (NumPy's rule), dtypes promote; a mean is
floating. Cost (COUNTING.md: one FLOP per element of a binary op's broadcast output): what the
chain of binary ops folded from the left computes, one FLOP per element of each partial result,
so n − 1 per output element when the shapes are equal; a mean adds one division per output
element. Gradient: a sum passes ``g`` to every input and a mean ``g / n`` (autograd sums it
back to a broadcast input's shape); a maximum or minimum passes ``g`` to the input that holds
the result, split evenly between tied inputs. SBP: split along any output dim (inputs broadcast
there stay B), as a binary elementwise op; a sum or mean of partial sums is a partial sum.
"""

from __future__ import annotations

__all__ = ["add_n", "maximum_n", "minimum_n", "mean_n"]  # the functional API

from functools import reduce
from math import prod

import numpy as np

from .. import dtypes as _dt
from ..dispatch import apply
from ..errors import ShapeError
from ..registry import Op, Spec, io_cost, register_op
from ..sbp import pointwise
from ._helpers import broadcast_shapes, float_dtype
from .elementwise import cast, div, eq, where


def _partial_shapes(name: str, inputs) -> list:
    """The broadcast shape of the first k inputs, for k = 2..n (the binary chain's results)."""
    shapes, shape = [], tuple(inputs[0].shape)
    for x in inputs[1:]:
        shape = broadcast_shapes(name, shape, tuple(x.shape))
        shapes.append(shape)
    return shapes


def _fold(name: str, combine: str, mean: bool = False):
    """The kernel of one n-ary op: every input folded into one output buffer with the ufunc
    ``combine``, in place, whatever the number of inputs (then divided by it for a mean)."""

    def forward(xp, *arrays):
        shape = reduce(lambda s, a: broadcast_shapes(name, s, a.shape), arrays[1:], arrays[0].shape)
        dtype = reduce(np.promote_types, (a.dtype for a in arrays))  # numpy's dtypes are CuPy's too
        out = xp.empty(shape, dtype)
        out[...] = arrays[0]
        fold = getattr(xp, combine)
        for a in arrays[1:]:
            fold(out, a, out=out)
        return out / len(arrays) if mean else out

    return forward


class _Nary(Op):
    """Shape and cost shared by the four ops; each has its kernel (``_fold``)."""

    mean = False            # divide by the number of inputs at the end
    linear = False          # a sum or a mean of partial sums is a partial sum
    # ptflops counts the chain of binary ops each stands for: one per element of each
    ptflops = "own_flops"

    @classmethod
    def shape(cls, *inputs):
        if not inputs:
            raise ShapeError(f"{cls.name}: expects at least one tensor")
        shapes = _partial_shapes(cls.name, inputs)
        dtype = reduce(_dt.promote, (x.dtype for x in inputs))
        return Spec(shapes[-1] if shapes else tuple(inputs[0].shape),
                    float_dtype(dtype) if cls.mean else dtype, inputs[0].device)

    @classmethod
    def cost(cls, out, *inputs):
        flops = sum(prod(s) for s in _partial_shapes(cls.name, inputs))
        if cls.mean:
            flops += prod(out.shape)
        return io_cost(out, inputs, flops=flops)

    @classmethod
    def sbp(cls, out, *inputs):
        # split along any output dim, as a binary elementwise op; all inputs P when linear
        return pointwise(inputs, out.shape, partial=((True,) * len(inputs),) if cls.linear else ())


@register_op("add_n", onnx="Sum")
class AddN(_Nary):
    forward = staticmethod(_fold("add_n", "add"))
    linear = True

    @staticmethod
    def vjp(g, out, *inputs):
        return tuple(g if x.requires_grad else None for x in inputs)


@register_op("mean_n", onnx="Mean")
class MeanN(_Nary):
    forward = staticmethod(_fold("mean_n", "add", mean=True))
    mean = True
    linear = True

    @staticmethod
    def vjp(g, out, *inputs):
        share = div(g, len(inputs))
        return tuple(share if x.requires_grad else None for x in inputs)


def _to_holders(g, out, *inputs) -> tuple:
    """The vjp of a maximum or minimum: ``g`` to the inputs equal to the result, split
    between ties."""
    holds = [eq(x, out) for x in inputs]
    ties = add_n(*(cast(h, g.dtype) for h in holds)) if len(holds) > 1 else cast(holds[0], g.dtype)
    share = div(g, ties)
    return tuple(where(h, share, 0.0) if x.requires_grad else None for x, h in zip(inputs, holds))


@register_op("maximum_n", onnx="Max")
class MaximumN(_Nary):
    forward = staticmethod(_fold("maximum_n", "maximum"))
    vjp = staticmethod(_to_holders)


@register_op("minimum_n", onnx="Min")
class MinimumN(_Nary):
    forward = staticmethod(_fold("minimum_n", "minimum"))
    vjp = staticmethod(_to_holders)


def add_n(*tensors):
    """``tensors[0] + tensors[1] + ...`` with broadcasting, as one op.

    >>> import flopcount.runtime as rt
    >>> add_n(rt.ones(2), rt.ones(2), rt.tensor([1.0, 2.0])).tolist()
    [3.0, 4.0]
    """
    return apply(AddN, *tensors)


def mean_n(*tensors):
    """The elementwise mean of ``tensors`` (broadcast), as one op."""
    return apply(MeanN, *tensors)


def maximum_n(*tensors):
    """The elementwise maximum of ``tensors`` (broadcast), as one op."""
    return apply(MaximumN, *tensors)


def minimum_n(*tensors):
    """The elementwise minimum of ``tensors`` (broadcast), as one op."""
    return apply(MinimumN, *tensors)
