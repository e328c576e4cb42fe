"""ONNX reductions (ReduceMean/Sum/Max/Min/Prod/L1/L2/SumSquare/LogSum/LogSumExp) and
ArgMax/ArgMin, TopK. ``axes`` is an input from opset 13 for ReduceSum and from opset 18 for the
others (an attribute before); empty axes reduce everything unless ``noop_with_empty_axes``.
"""

from __future__ import annotations

import numpy as np

from ...ops import elementwise as ew
from ...ops import movement, reduction
from ._base import constant, converter

_AXES_AS_INPUT_SINCE = {"ReduceSum": 13}


def _sum(x, dims, keep):
    return ew.cast(reduction.sum(x, dims, keep), x.dtype)  # the runtime widens integer sums


_REDUCE = {
    "ReduceMean": lambda x, d, k: reduction.mean(x, d, k),
    "ReduceSum": _sum,
    "ReduceMax": lambda x, d, k: reduction.amax(x, d, k),
    "ReduceMin": lambda x, d, k: reduction.amin(x, d, k),
    "ReduceProd": lambda x, d, k: reduction.prod(x, d, k),
    "ReduceL1": lambda x, d, k: _sum(ew.abs(x), d, k),
    "ReduceL2": lambda x, d, k: ew.sqrt(_sum(ew.mul(x, x), d, k)),
    "ReduceSumSquare": lambda x, d, k: _sum(ew.mul(x, x), d, k),
    "ReduceLogSum": lambda x, d, k: ew.log(_sum(x, d, k)),
    "ReduceLogSumExp": lambda x, d, k: _log_sum_exp(x, d, k),
}


def _log_sum_exp(x, dims, keep):
    """log(sum(exp(x))) around the maximum, as ``logsumexp`` computes it."""
    top = reduction.amax(x, dims, True)
    out = ew.add(ew.log(reduction.sum(ew.exp(ew.sub(x, top)), dims, True)), top)
    return out if keep else movement.squeeze(out, dims)


@converter(*_REDUCE)
def reduce(ctx, x, axes=None):
    if ctx.opset >= _AXES_AS_INPUT_SINCE.get(ctx.op_type, 18):
        dims = ctx.ints(axes, "input 'axes'")
    else:
        dims = ctx.attr("axes")
    if not dims:
        if ctx.attr("noop_with_empty_axes", 0):
            return x
        dims = None
    else:
        dims = ctx.axes(dims, x.ndim)
    keep = bool(ctx.attr("keepdims", 1))
    reduced = range(x.ndim) if dims is None else dims
    if any(x.shape[d] == 0 for d in reduced):
        return _empty_set(ctx, x, tuple(reduced), keep)
    return _REDUCE[ctx.op_type](x, dims, keep)


def _empty_set(ctx, x, dims: tuple, keep: bool):
    """A reduction over no elements: ONNX's identity of each reduction (max of nothing is -inf,
    the lowest value for integers), the same for every output: a constant of the output's shape."""
    shape = tuple(1 if d in dims else n for d, n in enumerate(x.shape) if keep or d not in dims)
    dtype = x.dtype.np
    if x.dtype.is_floating_point:
        lowest, highest = -np.inf, np.inf
    elif dtype == np.bool_:
        lowest, highest = False, True
    else:
        lowest, highest = np.iinfo(dtype).min, np.iinfo(dtype).max
    value = {"ReduceMax": lowest, "ReduceMin": highest, "ReduceProd": 1, "ReduceLogSum": -np.inf,
             "ReduceLogSumExp": -np.inf, "ReduceMean": np.nan}.get(ctx.op_type, 0)
    return constant(np.full(shape, value, dtype=dtype))


@converter("ArgMax", "ArgMin")
def arg_extreme(ctx, x):
    fn = reduction.argmax if ctx.op_type == "ArgMax" else reduction.argmin
    axis = ctx.axis(ctx.attr("axis", 0), x.ndim)
    keep = bool(ctx.attr("keepdims", 1))
    if not ctx.attr("select_last_index", 0):
        return fn(x, axis, keep)
    # the last extreme: the first one of the reversed dim, counted from the end
    return ew.sub(x.shape[axis] - 1, fn(movement.flip(x, axis), axis, keep))

