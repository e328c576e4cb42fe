"""Ops that select by value: TopK, NonZero, Unique, Compress, Hardmax.

NonZero, Unique and Compress give outputs whose size depends on the values: on the meta device
their shapes are the runtime ops' upper bounds (see ``ops/selection.py``), when running the
exact ones.
"""

from __future__ import annotations

import numpy as np

from ...ops import elementwise as ew
from ...ops import indexing, movement, reduction
from ...ops.selection import nonzero, topk, unique
from ._base import constant, converter


@converter("TopK")
def top_k(ctx, x, k=None):
    count = ctx.attr("k") if ctx.opset < 10 else ctx.scalar(k, "input 'K'")
    axis = ctx.axis(ctx.attr("axis", -1), x.ndim)
    return topk(x, int(count), axis, bool(ctx.attr("largest", 1)), bool(ctx.attr("sorted", 1)))


@converter("NonZero")
def non_zero(ctx, x):
    return nonzero(x)


@converter("Unique")
def unique_(ctx, x):
    axis = ctx.attr("axis")
    return unique(x, None if axis is None else ctx.axis(axis, x.ndim), bool(ctx.attr("sorted", 1)))


@converter("Compress")
def compress(ctx, x, condition):
    axis = ctx.attr("axis")
    if axis is None:
        x, axis = movement.reshape(x, (-1,)), 0
    axis = ctx.axis(axis, x.ndim)
    if condition.shape[0] > x.shape[axis]:  # values past the end select nothing
        condition = indexing.getitem(condition, (slice(0, x.shape[axis]),))
    picked = indexing.getitem(nonzero(condition), (0,))
    return indexing.index_select(x, axis, picked)


@converter("Hardmax")
def hardmax(ctx, x):
    """1 at the first maximum along ``axis``, 0 elsewhere (opset 13; before, over the 2-d
    coercion of the input at ``axis``)."""
    if ctx.opset >= 13:
        axis = ctx.axis(ctx.attr("axis", -1), x.ndim)
        return _one_hot_max(x, axis)
    axis = ctx.attr("axis", 1)
    axis = axis + x.ndim if axis < 0 else axis
    rows = int(np.prod(x.shape[:axis], dtype=np.int64))
    flat = movement.reshape(x, (rows, -1))
    return movement.reshape(_one_hot_max(flat, 1), x.shape)


def _one_hot_max(x, axis: int):
    first = reduction.argmax(x, axis, True)
    shape = [1] * x.ndim
    shape[axis] = x.shape[axis]
    positions = constant(np.arange(x.shape[axis], dtype=np.int64).reshape(shape))
    return ew.cast(ew.eq(positions, first), x.dtype)


