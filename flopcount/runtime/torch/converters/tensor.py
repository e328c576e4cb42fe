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
from ...ops import indexing, movement
from ...ops.indexing import IndexPut, normalize_index
from ...dispatch import apply
from ...tensor import Tensor, tensor
from ._base import converter

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

@converter("view", "_unsafe_view")
def view(ctx, self, size, *args):
    return movement.reshape(self, tuple(size))


@converter("permute")
def permute(ctx, self, dims):
    return movement.permute(self, tuple(dims))


@converter("transpose")
def transpose(ctx, self, dim0, dim1):
    return movement.transpose(self, dim0, dim1)


@converter("t")
def t(ctx, self):
    return self if self.ndim < 2 else movement.transpose(self, 0, 1)


@converter("expand")
def expand(ctx, self, size, implicit=False):
    return movement.expand(self, tuple(size))


@converter("unsqueeze")
def unsqueeze(ctx, self, dim):
    return movement.unsqueeze(self, dim)


@converter("squeeze")
def squeeze(ctx, self, dim=None):
    return movement.squeeze(self, dim)


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


@converter("index_select")
def index_select(ctx, self, dim, index):
    return indexing.index_select(self, dim, index)


@converter("gather")
def gather(ctx, self, dim, index, sparse_grad=False):
    return indexing.gather(self, dim, index)


def _put(self, key, value):
    """``self`` with ``self[key] = value``, as a new value (the functional form of a write)."""
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
        raise ctx.unsupported("index_put with accumulate=True (an index_add)")
    return _put(self, _index_key(indices), values)


@converter("copy")
def copy(ctx, self, src, non_blocking=False):
    """``self`` overwritten by ``src`` (broadcast, cast to ``self``'s dtype)."""
    return movement.expand(ew.cast(src, self.dtype), self.shape)


@converter("tril")
def tril(ctx, self, diagonal=0):
    return indexing.tril(self, diagonal)


@converter("triu")
def triu(ctx, self, diagonal=0):
    return indexing.triu(self, diagonal)


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


@converter("arange")
def arange(ctx, *args, **kwargs):
    # arange(end) / arange.start(start, end) / arange.start_step(start, end, step)
    bounds = [a for a in args if isinstance(a, (int, float))]
    spec = ctx.out_spec
    return tensor(np.arange(*bounds).astype(spec.dtype.np), device="cpu")
