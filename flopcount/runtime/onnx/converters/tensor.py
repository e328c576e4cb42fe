"""Shape and data-movement ONNX ops: Shape/Size/Constant/ConstantOfShape/Range (constants once
shapes are known), Reshape/Flatten/Squeeze/Unsqueeze/Transpose/Expand (views), Concat, Split,
Slice, Gather/GatherElements/GatherND, ScatterND, Tile, Pad, Trilu, CumSum, DepthToSpace,
SpaceToDepth, OneHot.

Operands that describe shapes (a Reshape target, Slice bounds, axes, pads) must be known at
import time: they are constants of the file or shape arithmetic that folded to constants.
"""

from __future__ import annotations

import math

import numpy as np

from ... import dtypes as _dt
from ...dispatch import apply
from ...errors import ShapeError
from ...nn.parameter import Parameter
from ...ops import elementwise as ew
from ...ops import indexing, movement, reduction, scatter
from ...ops.cumulative import cumprod
from ...ops._helpers import broadcast_shapes
from ...ops.embedding import Embedding
from ..elem_types import to_dtype
from ._base import constant, converter, is_const


# --- constants and shapes ----------------------------------------------------------------------

_CONSTANT_NUMBERS = {"value_float": np.float32, "value_floats": np.float32, "value_int": np.int64,
                     "value_ints": np.int64}


@converter("Constant")
def constant_node(ctx, *_):
    attrs = ctx.attrs
    if "value" in attrs:
        return constant(attrs["value"])
    for key, dtype in _CONSTANT_NUMBERS.items():
        if key in attrs:
            return constant(np.array(attrs[key], dtype))
    raise ctx.unsupported(f"a Constant with attribute(s) {sorted(attrs)} (sparse or string values) is not supported")


@converter("ConstantOfShape")
def constant_of_shape(ctx, shape):
    dims = ctx.ints(shape, "input 'shape'")
    value = ctx.attr("value")
    value = np.zeros(1, np.float32) if value is None else np.asarray(value).reshape(-1)
    ctx.check_size(dims, value.dtype, "input 'shape'")
    return constant(np.full(dims, value[0], dtype=value.dtype))


@converter("Shape")
def shape(ctx, x):
    start, end = ctx.attr("start", 0), ctx.attr("end")
    return constant(np.array(x.shape[start:end], dtype=np.int64))  # slicing clamps as ONNX does


@converter("Size")
def size(ctx, x):
    return constant(np.array(x.numel(), dtype=np.int64))


@converter("Range")
def range_(ctx, start, limit, delta):
    values = [ctx.const(t, f"input '{name}'") for t, name in ((start, "start"), (limit, "limit"), (delta, "delta"))]
    first, stop, step = (v.reshape(()).item() for v in values)
    if step == 0:
        raise ShapeError(f"input 'delta' is 0 (start {first}, limit {stop}): the range never ends")
    count = max(math.ceil((stop - first) / step), 0)
    ctx.check_size((count,), values[0].dtype, "Range")
    return constant((first + step * np.arange(count)).astype(values[0].dtype))


# --- views -------------------------------------------------------------------------------------

@converter("Reshape")
def reshape(ctx, x, target=None):
    dims = list(ctx.ints(target, "input 'shape'") if ctx.opset >= 5 else ctx.attr("shape"))
    if not ctx.attr("allowzero", 0):  # 0 copies the input's dim unless allowzero
        dims = [x.shape[i] if d == 0 else d for i, d in enumerate(dims)]
    return movement.reshape(x, dims)


@converter("Flatten")
def flatten(ctx, x):
    axis = ctx.attr("axis", 1)
    if not -x.ndim <= axis <= x.ndim:
        raise ShapeError(f"axis {axis} is out of range [-{x.ndim}, {x.ndim}] for input {x.shape}")
    axis = axis + x.ndim if axis < 0 else axis
    rows = math.prod(x.shape[:axis])
    return movement.reshape(x, (rows, math.prod(x.shape[axis:])))


def _axes_operand(ctx, axes, what="axes"):
    """Axes from the input (opset 13 on) or the attribute (before)."""
    return ctx.ints(axes, f"input '{what}'") if ctx.opset >= 13 else ctx.attr(what)


@converter("Squeeze")
def squeeze(ctx, x, axes=None):
    dims = _axes_operand(ctx, axes)
    if not dims:
        return movement.squeeze(x)
    return movement.squeeze(x, ctx.axes(dims, x.ndim))


@converter("Unsqueeze")
def unsqueeze(ctx, x, axes=None):
    dims = _axes_operand(ctx, axes)
    rank = x.ndim + len(dims)
    new = set(ctx.axes(dims, rank))
    if len(new) != len(dims):
        raise ShapeError(f"axes {tuple(dims)} name a dim twice")
    rest = iter(x.shape)
    return movement.reshape(x, tuple(1 if i in new else next(rest) for i in range(rank)))


@converter("Transpose")
def transpose(ctx, x):
    perm = ctx.attr("perm")
    return movement.permute(x, tuple(perm) if perm is not None else tuple(reversed(range(x.ndim))))


@converter("Expand")
def expand(ctx, x, target):
    # bidirectional: the output is the broadcast of the input's shape and the target
    return movement.expand(x, broadcast_shapes(ctx.where, x.shape, ctx.ints(target, "input 'shape'")))


# --- copies ------------------------------------------------------------------------------------

@converter("Concat")
def concat(ctx, *xs):
    return movement.cat(list(xs), ctx.axis(ctx.attr("axis"), xs[0].ndim))


@converter("Split")
def split(ctx, x, sizes=None):
    axis = ctx.axis(ctx.attr("axis", 0), x.ndim)
    n = x.shape[axis]
    parts = ctx.ints(sizes, "input 'split'") if ctx.opset >= 13 else ctx.attr("split")
    if not parts:
        count = ctx.attr("num_outputs") or ctx.n_outputs
        if ctx.attr("num_outputs"):  # opset 18: equal chunks, the last one smaller
            size = -(-n // count)
            parts = [size] * (count - 1) + [n - size * (count - 1)]
        elif n % count:
            raise ctx.unsupported(f"cannot split dim {axis} of size {n} (shape {x.shape}) into {count} equal parts")
        else:
            parts = [n // count] * count
    return tuple(movement.split(x, list(parts), axis))


@converter("Slice")
def slice_(ctx, x, starts=None, ends=None, axes=None, steps=None):
    if ctx.opset < 10:  # bounds were attributes before opset 10
        begin, end, dims, step = ctx.attr("starts"), ctx.attr("ends"), ctx.attr("axes"), None
    else:
        begin, end = ctx.ints(starts, "input 'starts'"), ctx.ints(ends, "input 'ends'")
        dims, step = ctx.ints(axes, "input 'axes'"), ctx.ints(steps, "input 'steps'")
    dims = ctx.axes(dims if dims else range(len(begin)), x.ndim)
    step = step or (1,) * len(begin)
    key = [slice(None)] * x.ndim
    for d, b, e, s in zip(dims, begin, end, step):
        key[d] = slice(b, e, s)  # Python's clamping of out-of-range bounds is ONNX's
    return indexing.getitem(x, tuple(key))


def _normalized_indices(ctx, indices, size: int):
    """Constant indices with negatives counted from the end; run-time indices as they are."""
    if not is_const(indices):
        return indices
    value = ctx.const(indices, "input 'indices'").astype(np.int64)
    if value.size and (value.min() < -size or value.max() >= size):
        raise ctx.unsupported(f"indices in [{value.min()}, {value.max()}] are out of range for a dim of size {size}")
    return constant(np.where(value < 0, value + size, value))


@converter("Gather")
def gather(ctx, data, indices):
    axis = ctx.axis(ctx.attr("axis", 0), data.ndim)
    index = _normalized_indices(ctx, indices, data.shape[axis])
    if is_const(index) and index.ndim == 0:  # one position: a view, not a copy
        return indexing.getitem(data, (slice(None),) * axis + (int(index.data),))
    if axis == 0 and data.ndim == 2 and isinstance(data, Parameter):
        # rows of a weight table: an embedding lookup (ids into a table are never negative)
        return apply(Embedding, data, index)
    items = [["s", 0, n, 1] for n in data.shape[:axis]] + [["t", 0]]
    return apply(indexing.Index, data, index, items=items)


@converter("GatherElements")
def gather_elements(ctx, data, indices):
    axis = ctx.axis(ctx.attr("axis", 0), data.ndim)
    return indexing.gather(data, axis, _normalized_indices(ctx, indices, data.shape[axis]))


@converter("GatherND")
def gather_nd(ctx, data, indices):
    batch = int(ctx.attr("batch_dims", 0))
    depth = indices.shape[-1]
    lead = indices.ndim - 1
    # one index tensor per indexed dim of data: aranges for the batch dims, then indices[..., j]
    parts = []
    for i in range(batch):
        shape = [1] * lead
        shape[i] = data.shape[i]
        parts.append(constant(np.arange(data.shape[i], dtype=np.int64).reshape(shape)))
    for j in range(depth):
        parts.append(indexing.getitem(indices, (Ellipsis, j)))
    items = [["t", k] for k in range(len(parts))]
    return apply(indexing.Index, data, *parts, items=items)


@converter("ScatterND")
def scatter_nd(ctx, data, indices, updates):
    reduction = ctx.attr("reduction", "none")
    if reduction != "none":
        return scatter.scatter_nd(data, ew.cast(indices, _dt.int64), ew.cast(updates, data.dtype), reduction)
    # data[indices[..., 0], indices[..., 1], ...] = updates
    parts = [indexing.getitem(indices, (Ellipsis, j)) for j in range(indices.shape[-1])]
    items = [["t", j] for j in range(len(parts))]
    return apply(indexing.IndexPut, data, ew.cast(updates, data.dtype), *parts, items=items)


@converter("ScatterElements", "Scatter")
def scatter_elements(ctx, data, indices, updates):
    axis = ctx.axis(ctx.attr("axis", 0), data.ndim)
    return scatter.scatter_elements(data, axis, ew.cast(indices, _dt.int64), ew.cast(updates, data.dtype),
                                    ctx.attr("reduction", "none"))


@converter("Tile")
def tile(ctx, x, repeats):
    return movement.repeat(x, ctx.ints(repeats, "input 'repeats'"))


_PAD_MODES = {"constant": "constant", "reflect": "reflect", "edge": "replicate", "wrap": "circular"}


@converter("Pad")
def pad(ctx, x, pads=None, value=None, axes=None):
    if ctx.opset < 11:  # pads and value were attributes before opset 11
        amounts, fill, dims = ctx.attr("pads"), ctx.attr("value", 0.0), None
    else:
        amounts, fill = ctx.ints(pads, "input 'pads'"), ctx.scalar(value, "input 'constant_value'")
        dims = ctx.ints(axes, "input 'axes'")
    dims = ctx.axes(dims if dims else range(x.ndim), x.ndim)
    pairs = [(0, 0)] * x.ndim
    for i, d in enumerate(dims):
        pairs[d] = (amounts[i], amounts[i + len(dims)])
    mode = ctx.attr("mode", "constant")
    if mode not in _PAD_MODES:
        raise ctx.unsupported(f"mode {mode!r} is not one of {sorted(_PAD_MODES)}")
    return movement.pad(x, movement.pad_list(pairs), _PAD_MODES[mode], 0.0 if fill is None else fill)


@converter("Trilu")
def trilu(ctx, x, k=None):
    diagonal = ctx.scalar(k, "input 'k'") or 0
    return indexing.triu(x, diagonal) if ctx.attr("upper", 1) else indexing.tril(x, diagonal)


@converter("CumSum", "CumProd")
def cumulative(ctx, x, axis):
    dim = ctx.axis(int(ctx.scalar(axis, "input 'axis'")), x.ndim)
    reverse = ctx.attr("reverse", 0)
    y = movement.flip(x, dim) if reverse else x
    y = reduction.cumsum(y, dim) if ctx.op_type == "CumSum" else cumprod(y, dim)
    if ctx.attr("exclusive", 0):  # shift by one along dim: the identity first, the last one dropped
        pairs = [0] * (2 * x.ndim)
        pairs[2 * (x.ndim - 1 - dim)], pairs[2 * (x.ndim - 1 - dim) + 1] = 1, -1
        y = movement.pad(y, pairs, value=0.0 if ctx.op_type == "CumSum" else 1.0)
    y = movement.flip(y, dim) if reverse else y
    return ew.cast(y, x.dtype)  # the runtime widens integer sums to int64; ONNX keeps the type


@converter("TensorScatter")
def tensor_scatter(ctx, cache, update, write_indices=None):
    """A KV cache (B, ..., S, ...) with each batch's ``update`` written along ``axis`` from its
    write index on (wrapping around with ``mode`` circular): one scatter at computed positions."""
    axis = ctx.axis(ctx.attr("axis", -2), cache.ndim)
    length, steps = cache.shape[axis], update.shape[axis]
    shape = [1] * cache.ndim
    shape[0] = cache.shape[0]
    start = constant(np.zeros(shape, np.int64)) if write_indices is None else \
        movement.reshape(ew.cast(write_indices, _dt.int64), shape)
    offsets = [1] * cache.ndim
    offsets[axis] = steps
    position = ew.add(start, constant(np.arange(steps, dtype=np.int64).reshape(offsets)))
    if ctx.attr("mode", "linear") == "circular":
        position = ew.remainder(position, length)
    return scatter.scatter_elements(cache, axis, movement.expand(position, update.shape), update)


@converter("OptionalHasElement")
def optional_has_element(ctx, x=None):
    return constant(np.array(x is not None))


@converter("OptionalGetElement")
def optional_get_element(ctx, x):
    return x


@converter("EyeLike")
def eye_like(ctx, x):
    # ones on the k-th diagonal of a matrix of x's shape: a constant once the shape is known
    dtype = to_dtype(ctx.attr("dtype"), f"{ctx.where}: attribute 'dtype'") if ctx.attr("dtype") is not None \
        else x.dtype
    rows, cols = x.shape
    return constant(np.eye(rows, cols, k=int(ctx.attr("k", 0)), dtype=dtype.np))


@converter("ReverseSequence")
def reverse_sequence(ctx, x, lengths):
    """The first lengths[b] steps of every sequence b reversed, the rest kept: a gather along
    the time axis with positions computed from the lengths."""
    time, batch = int(ctx.attr("time_axis", 0)), int(ctx.attr("batch_axis", 1))
    steps = x.shape[time]
    shape = [1] * x.ndim
    shape[time] = steps
    position = constant(np.arange(steps, dtype=np.int64).reshape(shape))
    lengths_shape = [1] * x.ndim
    lengths_shape[batch] = x.shape[batch]
    length = movement.reshape(ew.cast(lengths, _dt.int64), lengths_shape)
    source = ew.where(ew.lt(position, length), ew.sub(ew.sub(length, 1), position), position)
    return indexing.gather(x, time, movement.expand(source, x.shape))


@converter("CenterCropPad")
def center_crop_pad(ctx, x, shape):
    """Crop (centred, extra element at the end) or zero-pad (centred, extra at the end) the
    dims in ``axes`` to ``shape``."""
    target = ctx.ints(shape, "input 'shape'")
    axes = ctx.axes(ctx.attr("axes") or range(x.ndim), x.ndim)
    key = [slice(None)] * x.ndim
    pairs = [(0, 0)] * x.ndim
    for a, want in zip(axes, target):
        have = x.shape[a]
        if want < have:
            start = (have - want) // 2
            key[a] = slice(start, start + want)
        elif want > have:
            before = (want - have) // 2
            pairs[a] = (before, want - have - before)
    y = indexing.getitem(x, tuple(key))
    if any(p != (0, 0) for p in pairs):
        y = movement.pad(y, movement.pad_list(pairs))
    return y


@converter("DepthToSpace")
def depth_to_space(ctx, x):
    b = int(ctx.attr("blocksize"))
    n, c, h, w = x.shape
    if ctx.attr("mode", "DCR") == "DCR":
        y = movement.permute(movement.reshape(x, (n, b, b, c // (b * b), h, w)), (0, 3, 4, 1, 5, 2))
    else:
        y = movement.permute(movement.reshape(x, (n, c // (b * b), b, b, h, w)), (0, 1, 4, 2, 5, 3))
    return movement.reshape(movement.contiguous(y), (n, c // (b * b), h * b, w * b))


@converter("SpaceToDepth")
def space_to_depth(ctx, x):
    b = int(ctx.attr("blocksize"))
    n, c, h, w = x.shape
    mode = ctx.attr("mode", "DCR")
    if mode not in ("DCR", "CRD"):
        raise ctx.unsupported(f"mode {mode!r} is not one of DCR, CRD")
    # DCR puts the block offsets before the channels in the output's channel order, CRD (opset 28) after
    order = (0, 3, 5, 1, 2, 4) if mode == "DCR" else (0, 1, 3, 5, 2, 4)
    y = movement.permute(movement.reshape(x, (n, c, h // b, b, w // b, b)), order)
    return movement.reshape(movement.contiguous(y), (n, c * b * b, h // b, w // b))


@converter("OneHot")
def one_hot(ctx, indices, depth, values):
    size = int(ctx.scalar(depth, "input 'depth'"))
    axis = ctx.attr("axis", -1)
    rank = indices.ndim + 1
    axis = ctx.axis(axis, rank)
    classes = constant(np.arange(size, dtype=np.int64).reshape((size,) + (1,) * (rank - 1 - axis)))
    ids = movement.unsqueeze(ew.cast(indices, _dt.int64), axis)
    ids = ew.where(ew.lt(ids, 0), ew.add(ids, size), ids)
    off_on = ctx.const(values, "input 'values'").reshape(-1)
    on, off = constant(off_on[1:2].reshape(())), constant(off_on[0:1].reshape(()))
    return ew.where(ew.eq(ids, classes), on, off)

