"""Tensor ATen ops: views (``view``, ``permute``, ``slice``...), copies a functional graph does not
need (``clone``, ``alias``), joins and splits, indexing and scatters, and the factories a
``forward`` calls (``zeros``, ``arange``, ``new_ones``...).

Factories make constants: their shape and dtype are the ones the export recorded, so ops on
them fold at import (a causal mask built with ``arange`` and a comparison becomes a constant,
as in the runtime's own trace). ``clone`` and the other copies are the value itself: a
functional graph never writes into a value, so the copy changes nothing that is computed.
"""

from __future__ import annotations

import numpy as np

from ...graph.folding import fold_limit
from ...ops import elementwise as ew
from ...ops import indexing, movement, scatter
from ...ops.indexing import IndexPut, normalize_index
from ...dispatch import apply
from ...tensor import Tensor, tensor
from ._base import converter, same_arguments

# ATen's "to the end" for a slice
_END = 2 ** 63 - 1


# --- values that need no op ----------------------------------------------------------------------

@converter("clone", "alias", "detach", "lift_fresh")
def identity(ctx, self, *args, **kwargs):
    return self


@converter("_assert_tensor_metadata")
def assertion(ctx, *args, **kwargs):
    """A check torch.export inserts (transformers' models have them); it computes nothing."""
    return None


# --- views ---------------------------------------------------------------------------------------

same_arguments({"transpose": movement.transpose, "unsqueeze": movement.unsqueeze, "squeeze": movement.squeeze,
                "index_select": indexing.index_select, "tril": indexing.tril, "triu": indexing.triu})


@converter("view", "_unsafe_view")
def view(ctx, self, size, *args):
    return movement.reshape(self, tuple(size))


@converter("permute")
def permute(ctx, self, dims):
    return movement.permute(self, tuple(dims))


@converter("t")
def t(ctx, self):
    return self if self.ndim < 2 else movement.transpose(self, 0, 1)


@converter("expand")
def expand(ctx, self, size, implicit=False):
    return movement.expand(self, tuple(size))


@converter("select")
def select(ctx, self, dim, index):
    d = dim % self.ndim
    return indexing.getitem(self, (slice(None),) * d + (int(index),))


@converter("slice")
def slice_(ctx, self, dim=0, start=None, end=None, step=1):
    d = dim % self.ndim
    start, stop, step = slice(start, None if end == _END else end, step).indices(self.shape[d])
    return indexing.slice_dim(self, d, start, stop, step)


# --- splits and joins ------------------------------------------------------------------------------

@converter("split", "split_with_sizes")
def split(ctx, self, split_size, dim=0):
    return list(movement.split(self, split_size if isinstance(split_size, int) else list(split_size), dim))


@converter("unbind")
def unbind(ctx, self, dim=0):
    return list(movement.unbind(self, dim))


@converter("cat")
def cat(ctx, tensors, dim=0):
    tensors = [t for t in tensors if not (t.ndim == 1 and t.shape[0] == 0)]  # torch skips empty 1-d
    return tensors[0] if len(tensors) == 1 else movement.cat(tensors, dim)


@converter("stack")
def stack(ctx, tensors, dim=0):
    return movement.stack(list(tensors), dim)


@converter("roll")
def roll(ctx, self, shifts, dims=()):
    return movement.roll(self, tuple(shifts), tuple(dims) if dims else None)


@converter("flip")
def flip(ctx, self, dims):
    return movement.flip(self, tuple(dims))


@converter("repeat")
def repeat(ctx, self, repeats):
    return movement.repeat(self, tuple(repeats))


@converter("constant_pad_nd")
def constant_pad_nd(ctx, self, pad, value=0):
    return movement.pad(self, tuple(pad), value=value)


@converter("pad")
def pad(ctx, self, pad, mode="constant", value=None):
    return movement.pad(self, tuple(pad), mode=mode, value=0.0 if value is None else value)


@converter("reflection_pad1d", "reflection_pad2d", "reflection_pad3d")
def reflection_pad(ctx, self, padding):
    return movement.pad(self, tuple(padding), mode="reflect")


@converter("replication_pad1d", "replication_pad2d", "replication_pad3d")
def replication_pad(ctx, self, padding):
    return movement.pad(self, tuple(padding), mode="replicate")


# --- indexing and scatters ---------------------------------------------------------------------------

def _index_key(indices) -> tuple:
    """``aten.index``'s list (a tensor or None per leading dim) as a Python index."""
    return tuple(slice(None) if t is None else t for t in indices)


@converter("index")
def index(ctx, self, indices):
    return indexing.getitem(self, _index_key(indices))


@converter("gather")
def gather(ctx, self, dim, index, sparse_grad=False):
    return indexing.gather(self, dim, index)


def _put(self, key, value):
    """``self`` with ``self[key] = value``, as a new value (the functional form of a write)."""
    if self.device.type != "meta" and any(isinstance(k, Tensor) and k.device.type == "meta" for k in key):
        # a constant written at places the model computes (an inverse permutation: inv[perm] =
        # arange): the constant joins the traced values on meta, keeping its values
        self = self.to("meta")
    items, tensors = normalize_index(self, key)
    if not isinstance(value, Tensor):
        value = tensor(np.asarray(value, dtype=self.dtype.np), device="cpu")
    if value.dtype is not self.dtype:
        value = ew.cast(value, self.dtype)
    return apply(IndexPut, self, value, *tensors, items=items)


@converter("slice_scatter")
def slice_scatter(ctx, self, src, dim=0, start=None, end=None, step=1):
    d = dim % self.ndim
    start, stop, step = slice(start, None if end == _END else end, step).indices(self.shape[d])
    return _put(self, (slice(None),) * d + (slice(start, stop, step),), src)


@converter("select_scatter")
def select_scatter(ctx, self, src, dim, index):
    d = dim % self.ndim
    return _put(self, (slice(None),) * d + (int(index),), src)


@converter("index_put")
def index_put(ctx, self, indices, values, accumulate=False):
    if accumulate:
        return _accumulate_at(ctx, self, indices, values)
    return _put(self, _index_key(indices), values)


def _accumulate_at(ctx, self, indices, values):
    """``self[indices] += values`` with repeated indices adding up: a scatter_nd with "add" over
    the dims the index tensors address (the first k, or k adjacent ones after whole dims, moved
    to the front and back)."""
    indices = list(indices) + [None] * (self.ndim - len(indices))
    addressed = [d for d, t in enumerate(indices) if t is not None]
    if not addressed or addressed != list(range(addressed[0], addressed[-1] + 1)) or any(
            indices[d].dtype.name == "bool" for d in addressed):
        raise ctx.unsupported("index_put with accumulate=True needs integer index tensors on adjacent dims "
                              "(a boolean mask, or index tensors apart, is not supported)")
    first, k = addressed[0], len(addressed)
    shape = _broadcast(*(indices[d].shape for d in addressed))
    where = movement.stack([movement.expand(indices[d], shape) for d in addressed], -1)
    indexed = tuple(self.shape[:first]) + shape + tuple(self.shape[first + k:])
    values = movement.expand(_same_dtype(values, self), indexed)
    if first == 0:
        return scatter.scatter_nd(self, where, values, "add")
    front = list(range(first, first + k)) + [d for d in range(self.ndim) if not first <= d < first + k]
    value_front = list(range(first, first + len(shape))) + list(range(first)) + list(
        range(first + len(shape), len(indexed)))
    summed = scatter.scatter_nd(movement.permute(self, tuple(front)), where,
                                movement.permute(values, tuple(value_front)), "add")
    return movement.permute(summed, tuple(int(i) for i in np.argsort(front)))


def _broadcast(*shapes) -> tuple:
    from ...ops._helpers import broadcast_shapes

    out = ()
    for shape in shapes:
        out = broadcast_shapes("index_put", out, tuple(shape))
    return out


def _same_dtype(value, like):
    if not isinstance(value, Tensor):
        return tensor(np.asarray(value, dtype=like.dtype.np), device="cpu")
    return value if value.dtype is like.dtype else ew.cast(value, like.dtype)


# scatter_reduce's names for the runtime's reductions
_REDUCTIONS = {"sum": "add", "add": "add", "prod": "mul", "multiply": "mul", "amax": "max", "amin": "min"}


def _neutral(reduction: str, dtype):
    """The value ``reduction`` leaves unchanged, in ``dtype``'s range."""
    if reduction in ("add", "mul"):
        return 0 if reduction == "add" else 1
    if dtype.is_floating_point:
        return -np.inf if reduction == "max" else np.inf
    if dtype.name == "bool":
        return reduction == "min"
    limits = np.iinfo(dtype.np)
    return limits.min if reduction == "max" else limits.max


def _updates(self, index, src):
    """``src`` as the runtime's scatter takes it: the index's shape (torch reads only that corner
    of a larger ``src``; a number fills it) and ``self``'s dtype."""
    if not isinstance(src, Tensor):
        return movement.expand(movement.reshape(_same_dtype(src, self), (1,) * index.ndim), tuple(index.shape))
    if tuple(src.shape) != tuple(index.shape):
        src = indexing.getitem(src, tuple(slice(0, n) for n in index.shape))
    return _same_dtype(src, self)


@converter("scatter")
def scatter_(ctx, self, dim, index, src, reduce=None):
    """scatter.src / .value (a write), .reduce / .value_reduce (reduce="add" or "multiply")."""
    reduction = "none" if reduce is None else _REDUCTIONS[reduce]
    return scatter.scatter_elements(self, dim, index, _updates(self, index, src), reduction)


@converter("scatter_add")
def scatter_add(ctx, self, dim, index, src):
    return scatter.scatter_elements(self, dim, index, _updates(self, index, src), "add")


@converter("scatter_reduce")
def scatter_reduce(ctx, self, dim, index, src, reduce, include_self=True):
    if reduce not in _REDUCTIONS:
        raise ctx.unsupported(f"scatter_reduce with reduce={reduce!r} (sum, prod, amax and amin are supported)")
    reduction = _REDUCTIONS[reduce]
    updates = _updates(self, index, src)
    if not include_self:   # the written positions start from the reduction's neutral value
        start = np.full((1,) * index.ndim, _neutral(reduction, self.dtype), dtype=self.dtype.np)
        neutral = movement.expand(tensor(start, device="cpu"), tuple(index.shape))
        self = scatter.scatter_elements(self, dim, index, neutral, "none")
    return scatter.scatter_elements(self, dim, index, updates, reduction)


@converter("index_add")
def index_add(ctx, self, dim, index, source, alpha=1):
    """``self`` with ``alpha·source[..., i, ...]`` added at ``index[i]`` along ``dim``: a scatter
    with "add" whose index is ``index`` laid along ``dim`` of ``source``'s shape."""
    d = dim % max(self.ndim, 1)
    if source.ndim == 0:
        source = movement.reshape(source, (1,))
    laid = movement.reshape(index, tuple(index.numel() if i == d else 1 for i in range(source.ndim)))
    updates = _same_dtype(source if alpha == 1 else ew.mul(source, alpha), self)
    return scatter.scatter_elements(self, d, movement.expand(laid, tuple(source.shape)), updates, "add")


@converter("repeat_interleave")
def repeat_interleave(ctx, self, repeats=None, dim=None, output_size=None):
    """Each element (or slice along ``dim``) repeated: an int count is a copy (unsqueeze, repeat,
    reshape); counts in a tensor need its values (a constant), and become an index_select."""
    if ctx.overload == "Tensor":   # repeat_interleave(repeats): the indices 0, 0, 1, ... themselves
        counts = _constant_counts(ctx, self)
        return tensor(np.repeat(np.arange(len(counts)), counts).astype(np.int64), device="cpu")
    if dim is None:
        self, dim = movement.reshape(self, (self.numel(),)), 0
    d = dim % max(self.ndim, 1)
    if isinstance(repeats, Tensor):
        counts = _constant_counts(ctx, repeats)
        if len(counts) != 1:
            picks = tensor(np.repeat(np.arange(self.shape[d]), counts).astype(np.int64), device="cpu")
            return indexing.index_select(self, d, picks)
        repeats = int(counts[0])
    spread = movement.unsqueeze(self, d + 1)
    copies = movement.repeat(spread, tuple(repeats if i == d + 1 else 1 for i in range(spread.ndim)))
    return movement.reshape(copies, tuple(ctx.out_spec.shape))


def _constant_counts(ctx, repeats) -> np.ndarray:
    """The values of a repeat-count tensor that is a constant of the graph (a constant holds its
    array even on meta); counts the model computes have none while importing."""
    if repeats.data is None:
        raise ctx.unsupported("repeat counts held in a tensor computed by the model: the output size depends on "
                              "their values, which a count on shapes does not have")
    return np.asarray(repeats.data).reshape(-1).astype(np.int64)


@converter("copy")
def copy(ctx, self, src, non_blocking=False):
    """``self`` overwritten by ``src`` (broadcast, cast to ``self``'s dtype)."""
    return movement.expand(ew.cast(src, self.dtype), self.shape)


@converter("diff")
def diff(ctx, self, n=1, dim=-1, prepend=None, append=None):
    parts = [t for t in (prepend, self, append) if t is not None]
    x = parts[0] if len(parts) == 1 else movement.cat(parts, dim)
    for _ in range(n):
        length = x.shape[dim % x.ndim]
        x = ew.sub(movement.narrow(x, dim, 1, length - 1), movement.narrow(x, dim, 0, length - 1))
    return x


# --- factories --------------------------------------------------------------------------------------

FILLED_IN_FULL_BYTES = 64 << 10   # larger filled constants are one element broadcast


def _filled(ctx, value) -> Tensor:
    """A constant of the recorded output's shape and dtype, every element ``value``. Above a few
    KiB it is one element broadcast (a view), so memory stays bounded while importing: a decoder
    fills a buffer per layer (DeepSeek's keys assembled in a ``new_empty``, 200 MB at a 2k
    context) that a scatter then writes into, and 61 of them held in full took 6 GB."""
    spec = ctx.out_spec
    shape, dtype = tuple(spec.shape), spec.dtype
    if np.prod(shape, dtype=np.int64) * dtype.itemsize <= min(FILLED_IN_FULL_BYTES, fold_limit()):
        return tensor(np.full(shape, value, dtype=dtype.np), device="cpu")
    one = tensor(np.full((1,) * len(shape), value, dtype=dtype.np), device="cpu")
    return movement.expand(one, shape)


@converter("zeros", "new_zeros", "zeros_like", "zero", "empty", "new_empty", "empty_like", "empty_strided",
           "new_empty_strided", "empty_permuted")
def zeros(ctx, *args, **kwargs):
    # empty's contents are unspecified; zeros are one valid choice and keep counts exact
    return _filled(ctx, 0)


@converter("ones", "new_ones", "ones_like")
def ones(ctx, *args, **kwargs):
    return _filled(ctx, 1)


@converter("full")
def full(ctx, size, fill_value, **kwargs):
    return _filled(ctx, fill_value)


@converter("new_full", "full_like")
def full_like(ctx, self, size_or_value, fill_value=None, **kwargs):
    return _filled(ctx, size_or_value if fill_value is None else fill_value)


@converter("scalar_tensor")
def scalar_tensor(ctx, s, **kwargs):
    return _filled(ctx, s)


@converter("fill")
def fill(ctx, self, value):
    if isinstance(value, Tensor):  # fill.Tensor: a 0-d value broadcast to self's shape
        return movement.expand(ew.cast(value, self.dtype), self.shape)
    return _filled(ctx, value)


@converter("eye")
def eye(ctx, n, m=None, **kwargs):
    """The identity matrix (n x m) as a constant; above the fold limit, the comparison of two
    index ranges that makes it (recorded as ops, not held in memory while importing)."""
    spec = ctx.out_spec
    rows, cols = spec.shape
    if rows * cols * spec.dtype.itemsize <= fold_limit():
        return tensor(np.eye(rows, cols, dtype=spec.dtype.np), device="cpu")
    column = tensor(np.arange(rows, dtype=np.int64).reshape(rows, 1), device="cpu")
    row = tensor(np.arange(cols, dtype=np.int64).reshape(1, cols), device="cpu")
    return ew.cast(ew.eq(column, row), spec.dtype)


@converter("arange")
def arange(ctx, *args, **kwargs):
    # arange(end) / arange.start(start, end) / arange.start_step(start, end, step)
    bounds = [a for a in args if isinstance(a, (int, float))]
    spec = ctx.out_spec
    return tensor(np.arange(*bounds).astype(spec.dtype.np), device="cpu")
