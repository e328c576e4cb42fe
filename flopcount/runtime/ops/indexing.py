"""Indexing: ``x[...]`` (basic slicing is a view; tensor indices gather), ``x[...] = v``,
gather, index_select, tril/triu, and the scatter ops their gradients need.

An index is normalized to a JSON-friendly list of items so graphs can store it:
``["s", start, stop, step]`` a slice, ``["i", k]`` an integer, ``["n"]`` a new axis (None),
``["t", j]`` the j-th index tensor (passed as an op input).
"""

from __future__ import annotations

__all__ = ["getitem", "setitem_", "slice_dim", "index_select", "gather", "tril", "triu"]  # the functional API (nn.functional re-exports it)

import numpy as np

from .. import dtypes as _dt
from ..dispatch import apply
from ..errors import ShapeError
from ..registry import STRIDED, VIEW, Cost, Op, Spec, io_cost, nbytes, no_cost, numel, register_op
from ..sbp import B, P, S, Signature, Split, local_shape
from ..tensor import Tensor
from ._helpers import as_tensor, broadcast_shapes, norm_dim, same_spec


# --- index normalization -----------------------------------------------------------------------

def normalize_index(x, index) -> tuple[list, list]:
    """Turn a Python index into (items, index tensors); see the module docstring."""
    if not isinstance(index, tuple):
        index = (index,)
    tensors: list = []
    converted = []
    for item in index:
        if isinstance(item, (list, np.ndarray)) or (isinstance(item, Tensor)):
            t = item if isinstance(item, Tensor) else _index_tensor(item, x)
            if t.dtype is _dt.bool_:
                converted.extend(_bool_to_int_indices(t, x))
                continue
            if t.dtype._rank != 1:
                raise ShapeError(f"index: tensors used as indices must be integer or bool, got {t.dtype.name}")
            converted.append(t if t.device == x.device else t.to(x.device))  # as PyTorch does
        else:
            converted.append(item)
    consumed = sum(1 for it in converted if it is not None and it is not Ellipsis)
    if consumed > x.ndim:
        raise ShapeError(f"index: too many indices ({consumed}) for a tensor of shape {x.shape}")
    items, dim = [], 0
    for item in converted:
        if item is Ellipsis:
            for _ in range(x.ndim - consumed):
                items.append(["s", 0, x.shape[dim], 1])
                dim += 1
        elif item is None:
            items.append(["n"])
        elif isinstance(item, slice):
            start, stop, step = item.indices(x.shape[dim])
            items.append(["s", start, stop, step])
            dim += 1
        elif isinstance(item, Tensor):
            items.append(["t", len(tensors)])
            tensors.append(item)
            dim += 1
        else:
            k = int(item)
            n = x.shape[dim]
            if not -n <= k < n:
                raise ShapeError(f"index: index {k} is out of range for dim {dim} of size {n} (shape {x.shape})")
            items.append(["i", k % n])
            dim += 1
    return items, tensors


def _index_tensor(value, like) -> Tensor:
    from ..tensor import tensor

    arr = np.asarray(value)
    if arr.dtype != np.bool_:
        arr = arr.astype(np.int64)
    return tensor(arr, device=like.device)


def _bool_to_int_indices(mask: Tensor, x) -> list:
    if mask.data is None:
        raise ShapeError("index: a boolean mask gives a data-dependent shape, which meta tensors and "
                         "traced graphs cannot have; use where() or masked_fill() instead")
    from ..device import backend

    xp = backend(mask.device).xp
    return [Tensor._make(a.astype(np.int64), tuple(a.shape), _dt.int64, mask.device)
            for a in xp.nonzero(mask.data)]


def _as_key(items, arrays):
    key = []
    for it in items:
        kind = it[0]
        if kind == "s":
            stop = it[2]
            key.append(slice(it[1], None if stop < 0 else stop, it[3]))
        elif kind == "i":
            key.append(it[1])
        elif kind == "n":
            key.append(None)
        else:
            key.append(arrays[it[1]])
    return tuple(key)


def _slice_len(start, stop, step) -> int:
    return len(range(start, stop, step))


def indexed_shape(op: str, shape: tuple, items: list, tensor_shapes: list) -> tuple:
    """Output shape of ``x[items]`` by NumPy's rules (advanced dims go where NumPy puts them)."""
    basic, adv_shapes, adv_pos = [], [], []
    advanced = any(it[0] == "t" for it in items)
    dim = 0
    for pos, it in enumerate(items):
        kind = it[0]
        if kind == "s":
            basic.append((pos, _slice_len(it[1], it[2], it[3])))
            dim += 1
        elif kind == "n":
            basic.append((pos, 1))
        elif kind == "i":
            if advanced:  # with tensor indices, an integer is a 0-d advanced index
                adv_shapes.append(())
                adv_pos.append(pos)
            dim += 1
        else:
            adv_shapes.append(tuple(tensor_shapes[it[1]]))
            adv_pos.append(pos)
            dim += 1
    trailing = list(shape[dim:])
    if not adv_pos:
        return tuple(b for _, b in basic) + tuple(trailing)
    bshape: tuple = ()
    for s in adv_shapes:
        bshape = broadcast_shapes(op, bshape, s)
    if adv_pos == list(range(adv_pos[0], adv_pos[-1] + 1)):
        before = [b for p, b in basic if p < adv_pos[0]]
        after = [b for p, b in basic if p > adv_pos[-1]]
        return tuple(before) + bshape + tuple(after) + tuple(trailing)
    return bshape + tuple(b for _, b in basic) + tuple(trailing)


# --- SBP of basic indexing ------------------------------------------------------------------------

def _dim_items(items: list, ndim: int) -> list:
    """For each dim of the indexed tensor: (its item, or None past the items; the dim of the
    result it becomes, or None for an integer index)."""
    out, od = [], 0
    for it in items:
        if it[0] == "n":
            od += 1
        elif it[0] == "s":
            out.append((it, od))
            od += 1
        else:
            out.append((it, None))
    for _ in range(len(out), ndim):
        out.append((None, od))
        od += 1
    return out


def _sliced_sbp(sbp, items: list, shape: tuple):
    """The SBP of ``x[items]`` for ``x`` of ``shape`` split ``sbp``, or None. A slice along the
    split dim keeps the split when it covers whole blocks (q, k, v sliced out of a fused
    projection split block-wise hold each rank's heads)."""
    if not isinstance(sbp, Split):
        return sbp
    it, od = _dim_items(items, len(shape))[sbp.dim]
    if od is None:
        return None
    size = shape[sbp.dim]
    if it is None or (it[1], it[2], it[3]) == (0, size, 1):
        return Split(od, sbp.blocks)
    block = size // sbp.blocks
    if it[3] == 1 and it[1] % block == 0 and it[2] % block == 0:
        return Split(od, (it[2] - it[1]) // block)
    return None


def _unsliced_sbp(sbp, items: list, shape: tuple):
    """The SBP ``x`` (of ``shape``) needs for ``x[items]`` to be split ``sbp``, or None."""
    if not isinstance(sbp, Split):
        return sbp
    for d, (it, od) in enumerate(_dim_items(items, len(shape))):
        if od != sbp.dim:
            continue
        size = shape[d]
        if it is None or (it[1], it[2], it[3]) == (0, size, 1):
            return Split(d, sbp.blocks)
        block = (it[2] - it[1]) // sbp.blocks if it[3] == 1 else 0
        if block and size % block == 0 and it[1] % block == 0:
            return Split(d, size // block)
        return None
    return None


def _local_items(items: list, shape: tuple, sbp, n: int) -> list:
    """``items`` as rank-local bounds when ``x`` (of ``shape``) is split ``sbp`` over ``n``."""
    if not isinstance(sbp, Split):
        return items
    out, d = [], 0
    for it in items:
        if it[0] != "n":
            if d == sbp.dim and it[0] == "s":
                block = shape[d] // sbp.blocks
                it = ["s", it[1] // block * (block // n), it[2] // block * (block // n), 1]
            d += 1
        out.append(it)
    return out


# --- ops ---------------------------------------------------------------------------------------

@register_op("getitem", ptflops="zero")
class GetItem(Op):
    """Basic indexing (slices, integers, None): a strided view."""
    computes = False  # moves or selects elements: runs on any dtype's storage

    cost = no_cost  # a view

    def view(x_contiguous, x, out, *, items):
        # a contiguous block: integers, then one unit-step slice, then only whole dims (None
        # adds a size-1 dim anywhere); anything else strides
        dim, sliced = 0, False
        for item in items:
            kind = item[0]
            if kind == "n":
                continue
            if sliced and not (kind == "s" and tuple(item[1:4]) == (0, x.shape[dim], 1)):
                return STRIDED
            if kind == "s":
                if item[3] != 1:
                    return STRIDED
                sliced = True
            dim += 1
        return VIEW if x_contiguous else STRIDED

    def shape(x, *, items):
        return Spec(indexed_shape("getitem", x.shape, items, []), x.dtype, x.device)

    def forward(xp, x, *, items):
        return x[_as_key(items, ())]

    def vjp(g, out, x, *, items):
        return apply(GetItemBackward, g, shape=tuple(x.shape), items=items)

    layout = True  # SBP: a split follows its dim, through slices that cover whole blocks

    def output_sbp(sbp, n, out, x, *, items):
        return _sliced_sbp(sbp, items, tuple(x.shape))

    def input_sbp(sbp, n, out, x, *, items):
        return _unsliced_sbp(sbp, items, tuple(x.shape))

    def shard_attrs(attrs, signature, n, index, out, x):
        return {**attrs, "items": _local_items(attrs["items"], tuple(x.shape), signature.inputs[0], n)}


@register_op("getitem_backward")
class GetItemBackward(Op):
    """Gradient of basic indexing: zeros of the input's shape with ``g`` written into the view."""
    backward = True  # dispatched by a vjp

    def shape(g, *, shape, items):
        return Spec(tuple(shape), g.dtype, g.device)

    def forward(xp, g, *, shape, items):
        out = xp.zeros(shape, dtype=g.dtype)
        out[_as_key(items, ())] = g
        return out

    def vjp(gg, out, g, *, shape, items):
        return apply(GetItem, gg, items=items)

    def cost(out, g, *, shape, items):
        return io_cost(out, (g,))

    # SBP: getitem's mapping read backwards (each rank writes its slice into its zeros)
    layout = True

    def output_sbp(sbp, n, out, g, *, shape, items):
        return _unsliced_sbp(sbp, items, tuple(shape))

    def input_sbp(sbp, n, out, g, *, shape, items):
        return _sliced_sbp(sbp, items, tuple(shape))

    def shard_attrs(attrs, signature, n, index, out, g):
        sbp = signature.outputs[0]
        return {**attrs, "shape": local_shape(out.shape, sbp, n),
                "items": _local_items(attrs["items"], tuple(out.shape), sbp, n)}


@register_op("index", ptflops="zero")
class Index(Op):
    """Advanced indexing with integer tensors: a gather that copies."""
    computes = False  # moves or selects elements: runs on any dtype's storage

    def shape(x, *index, items):
        return Spec(indexed_shape("index", x.shape, items, [t.shape for t in index]), x.dtype, x.device)

    def forward(xp, x, *index, items):
        return x[_as_key(items, index)]

    def vjp(g, out, x, *index, items):
        gx = apply(IndexBackward, g, *index, shape=tuple(x.shape), items=items)
        return (gx,) + (None,) * len(index)

    def cost(out, x, *index, items):
        # reads the gathered elements (not the whole source) and the indices
        return Cost(bytes_read=nbytes(out) + sum(nbytes(t) for t in index), bytes_written=nbytes(out))


def _scatter_add(xp, out, key, values):
    if hasattr(xp, "add") and hasattr(xp.add, "at"):
        xp.add.at(out, key, values)
    else:  # CuPy
        import cupyx

        cupyx.scatter_add(out, key, values)


@register_op("index_backward")
class IndexBackward(Op):
    """Gradient of a gather: scatter-add ``g`` into zeros (repeated indices accumulate)."""
    backward = True  # dispatched by a vjp

    def shape(g, *index, shape, items):
        return Spec(tuple(shape), g.dtype, g.device)

    def forward(xp, g, *index, shape, items):
        out = xp.zeros(shape, dtype=g.dtype)
        _scatter_add(xp, out, _as_key(items, index), g)
        return out

    def vjp(gg, out, g, *index, shape, items):
        return (apply(Index, gg, *index, items=items),) + (None,) * len(index)

    def cost(out, g, *index, shape, items):
        return io_cost(out, (g,) + index, flops=numel(g))  # one add per scattered element


@register_op("index_put", ptflops="zero")
class IndexPut(Op):
    """``x[items] = value`` as a new tensor (``x.__setitem__`` rebinds ``x`` to it)."""
    computes = False  # moves or selects elements: runs on any dtype's storage

    def shape(x, value, *index, items):
        target = indexed_shape("index_put", x.shape, items, [t.shape for t in index])
        broadcast_shapes("index_put", target, value.shape)
        return same_spec(x)

    def forward(xp, x, value, *index, items):
        out = x.copy()
        out[_as_key(items, index)] = value
        return out

    def vjp(g, out, x, value, *index, items):
        gx = apply(IndexPut, g, as_tensor(0.0, g), *index, items=items) if x.requires_grad else None
        gv = None
        if value.requires_grad:
            op = Index if index else GetItem
            gv = apply(op, g, *index, items=items)
        return (gx, gv) + (None,) * len(index)

    def cost(out, x, value, *index, items):
        return io_cost(out, (x, value) + index)


@register_op("gather", ptflops="zero")
class Gather(Op):
    """``torch.gather``: out[i][j] = x[i][index[i][j]] along ``dim``."""
    computes = False  # moves or selects elements: runs on any dtype's storage

    def shape(x, index, *, dim):
        if index.ndim != x.ndim:
            raise ShapeError(f"gather: index {index.shape} and input {x.shape} need the same number of dims")
        if index.dtype.is_floating_point or index.dtype.name == "bool":
            raise ShapeError(f"gather: index must hold integers, got {index.dtype.name}")
        return Spec(tuple(index.shape), x.dtype, x.device)

    def forward(xp, x, index, *, dim):
        return xp.take_along_axis(x, index, axis=dim)

    def vjp(g, out, x, index, *, dim):
        return apply(GatherBackward, g, index, dim=dim, shape=tuple(x.shape)), None

    def cost(out, x, index, *, dim):
        return Cost(bytes_read=nbytes(out) + nbytes(index), bytes_written=nbytes(out))

    def sbp(out, x, index, *, dim):
        return _gather_sbp(x.shape, index.shape, dim)


@register_op("gather_backward")
class GatherBackward(Op):
    """Scatter-add of ``g`` along ``dim`` into zeros of the source's shape."""
    backward = True  # dispatched by a vjp

    def shape(g, index, *, dim, shape):
        return Spec(tuple(shape), g.dtype, g.device)

    def forward(xp, g, index, *, dim, shape):
        out = xp.zeros(shape, dtype=g.dtype)
        grids = list(xp.ix_(*(xp.arange(n) for n in index.shape)))  # open mesh (CuPy has no sparse indices)
        grids[dim] = index
        _scatter_add(xp, out, tuple(grids), g)
        return out

    def vjp(gg, out, g, index, *, dim, shape):
        return apply(Gather, gg, index, dim=dim), None

    def cost(out, g, index, *, dim, shape):
        return io_cost(out, (g, index), flops=numel(g))  # one add per scattered element

    def sbp(out, g, index, *, dim, shape):
        # the gather's signatures read backwards; a scatter-add of partial sums is one
        return _gather_sbp(shape, index.shape, dim) + [Signature((P, B), (P,))]

    def shard_attrs(attrs, signature, n, index, out, g, idx):
        return {**attrs, "shape": local_shape(out.shape, signature.outputs[0], n)}


def _gather_sbp(x_shape: tuple, index_shape: tuple, dim: int) -> list:
    """torch.gather splits along any dim but ``dim`` where source and index have one size."""
    return [Signature((S(d), S(d)), (S(d),)) for d in range(len(x_shape))
            if d != dim and x_shape[d] == index_shape[d] > 1]


def _triangle(name, np_name):
    @register_op(name, ptflops="zero")
    class Triangle(Op):
        computes = False  # moves or selects elements: runs on any dtype's storage
        def shape(x, *, diagonal):
            if x.ndim < 2:
                raise ShapeError(f"{name}: needs at least 2 dims, got shape {x.shape}")
            return same_spec(x)

        def forward(xp, x, *, diagonal):
            return getattr(xp, np_name)(x, diagonal)

        def vjp(g, out, x, *, diagonal):
            return apply(Triangle, g, diagonal=diagonal)

        def cost(out, x, *, diagonal):
            return io_cost(out, (x,))  # a masked copy

        def sbp(out, x, *, diagonal):
            # the triangle is drawn in the last two dims: only the leading ones split
            return [Signature((S(d),), (S(d),)) for d in range(x.ndim - 2) if x.shape[d] > 1] + \
                [Signature((P,), (P,))]

    Triangle.__name__ = Triangle.__qualname__ = name.title()
    return Triangle


Tril = _triangle("tril", "tril")
Triu = _triangle("triu", "triu")


# --- functional API ----------------------------------------------------------------------------

def getitem(x, index):
    """``x[index]``: basic indexing is a view; tensor or list indices gather a copy."""
    items, tensors = normalize_index(x, index)
    if tensors:
        return apply(Index, x, *tensors, items=items)
    if all(it[0] == "s" and it[1] == 0 and it[2] == x.shape[i] and it[3] == 1 for i, it in enumerate(items)):
        return x
    return apply(GetItem, x, items=items)


def setitem_(x, index, value) -> None:
    """``x[index] = value``: computes the updated tensor and makes ``x`` refer to it."""
    items, tensors = normalize_index(x, index)
    value = as_tensor(value, x) if not isinstance(value, Tensor) else value
    if value.dtype is not x.dtype:
        from .elementwise import cast

        value = cast(value, x.dtype)
    if x.requires_grad and x._node is None:
        raise ShapeError(f"index assignment: a leaf tensor that requires grad (shape {x.shape}) cannot be "
                         f"changed in place; assign into a copy (x = x.clone()) instead")
    # The value before assignment becomes its own tensor and takes x's place in the tape.
    before = Tensor._make(x.data, x.shape, x.dtype, x.device, x.requires_grad)
    before._node, before._value = x._node, x._value
    if x._node is not None:
        x._node.outputs = tuple(before if o is x else o for o in x._node.outputs)
    new = apply(IndexPut, before, value, *tensors, items=items)
    x.data, x._node, x._value = new.data, new._node, new._value
    x.requires_grad = new.requires_grad
    if x._node is not None:
        x._node.outputs = tuple(x if o is new else o for o in x._node.outputs)


def slice_dim(x, dim: int, start: int, stop: int, step: int = 1):
    """``x`` restricted to ``start:stop:step`` along ``dim`` (a view)."""
    d = norm_dim("slice", dim, x.ndim)
    key = (slice(None),) * d + (slice(start, stop, step),)
    return getitem(x, key)


def index_select(x, dim: int, index):
    d = norm_dim("index_select", dim, x.ndim)
    if index.ndim != 1:
        raise ShapeError(f"index_select: index must be 1-d, got shape {index.shape}")
    return apply(Index, x, index, items=[["s", 0, n, 1] for n in x.shape[:d]] + [["t", 0]])


def gather(x, dim: int, index):
    return apply(Gather, x, index, dim=norm_dim("gather", dim, x.ndim))


def tril(x, diagonal: int = 0):
    return apply(Tril, x, diagonal=int(diagonal))


def triu(x, diagonal: int = 0):
    return apply(Triu, x, diagonal=int(diagonal))
