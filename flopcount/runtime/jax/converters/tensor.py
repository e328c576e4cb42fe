"""Shape and data-movement primitives: reshape, transpose, broadcast_in_dim, squeeze,
expand_dims, concatenate, slice, dynamic_slice, pad, gather (embedding lookups), select_n,
convert_element_type, iota."""

from __future__ import annotations

import math

import numpy as np

from ...ops import elementwise as ew
from ...ops import indexing, movement
from ...ops.elementwise import cast
from ...ops.embedding import embedding
from ._base import constant, converter, dtype_of


@converter("reshape")
def reshape(ctx, x, *dynamic):
    if ctx.params.get("dimensions") not in (None, ()):
        raise ctx.unsupported("reshape with 'dimensions' (a transpose first) is not supported")
    return movement.reshape(x, tuple(int(n) for n in ctx.params["new_sizes"]))


@converter("transpose")
def transpose(ctx, x):
    return movement.permute(x, tuple(int(d) for d in ctx.params["permutation"]))


@converter("squeeze")
def squeeze(ctx, x):
    dims = {int(d) for d in ctx.params["dimensions"]}
    return movement.reshape(x, tuple(n for i, n in enumerate(x.shape) if i not in dims))


@converter("expand_dims")
def expand_dims(ctx, x):
    return movement.reshape(x, tuple(int(n) for n in ctx.out_avals[0].shape))


@converter("broadcast_in_dim")
def broadcast_in_dim(ctx, x, *dynamic):
    shape = tuple(int(n) for n in ctx.params["shape"])
    kept = tuple(int(d) for d in ctx.params["broadcast_dimensions"])
    lifted = [1] * len(shape)
    for i, d in enumerate(kept):
        lifted[d] = x.shape[i]
    return movement.expand(movement.reshape(x, tuple(lifted)), shape)


@converter("concatenate")
def concatenate(ctx, *xs):
    return movement.cat(list(xs), dim=int(ctx.params["dimension"]))


@converter("slice")
def slice_(ctx, x):
    starts, limits = ctx.params["start_indices"], ctx.params["limit_indices"]
    strides = ctx.params.get("strides") or (1,) * x.ndim
    return indexing.getitem(x, tuple(slice(int(s), int(e), int(st)) for s, e, st in zip(starts, limits, strides)))


@converter("dynamic_slice")
def dynamic_slice(ctx, x, *starts):
    sizes = tuple(ctx.params["slice_sizes"])
    index = []
    for d, (start, size) in enumerate(zip(starts, sizes)):
        s = int(ctx.const(start, f"start index of dim {d}").reshape(()))
        s = min(max(s, 0), x.shape[d] - size)   # XLA clamps the window into the operand
        index.append(slice(s, s + size))
    return indexing.getitem(x, tuple(index))


@converter("pad")
def pad(ctx, x, value):
    config = ctx.params["padding_config"]
    if any(interior for _, _, interior in config):
        raise ctx.unsupported("interior padding is not supported")
    if any(lo < 0 or hi < 0 for lo, hi, _ in config):
        raise ctx.unsupported("negative padding (cropping) is not supported")
    fill = float(ctx.const(value, "the padding value").reshape(()))
    return movement.pad(x, movement.pad_list((lo, hi) for lo, hi, _ in config), value=fill)


@converter("select_n")
def select_n(ctx, which, *cases):
    if len(cases) == 1:
        return cases[0]
    if which.dtype.name == "bool":
        return ew.where(which, cases[1], cases[0])
    y = cases[-1]
    for i in range(len(cases) - 2, -1, -1):
        y = ew.where(ew.eq(which, constant(np.array(i, which.dtype.np))), cases[i], y)
    return y


@converter("convert_element_type")
def convert_element_type(ctx, x):
    return cast(x, dtype_of(ctx.params["new_dtype"]))


@converter("iota")
def iota(ctx, *dynamic):
    shape, dim = tuple(ctx.params["shape"]), int(ctx.params["dimension"])
    dtype = np.dtype(ctx.params["dtype"])
    lifted = [1] * len(shape)
    lifted[dim] = shape[dim]
    return constant(np.broadcast_to(np.arange(shape[dim], dtype=dtype).reshape(lifted), shape).copy())


@converter("gather")
def gather(ctx, operand, indices):
    """Rows of a table picked by integer ids (``table[ids]``, ``jnp.take``): an embedding
    lookup. Other gathers are not supported."""
    dn = ctx.params["dimension_numbers"]
    sizes = tuple(ctx.params["slice_sizes"])
    rows_only = (tuple(dn.collapsed_slice_dims) == (0,) and tuple(dn.start_index_map) == (0,)
                 and sizes[0] == 1 and sizes[1:] == tuple(operand.shape[1:])
                 and indices.shape[-1:] == (1,) and not tuple(getattr(dn, "operand_batching_dims", ()) or ()))
    offsets = tuple(dn.offset_dims)
    if not rows_only or offsets != tuple(range(indices.ndim - 1, indices.ndim - 1 + operand.ndim - 1)):
        raise ctx.unsupported(f"a gather other than a row lookup (dimension numbers {dn}) is not supported")
    ids = movement.reshape(indices, tuple(indices.shape[:-1]))
    if operand.ndim == 2:
        return embedding(ids, operand)
    flat = movement.reshape(operand, (operand.shape[0], math.prod(operand.shape[1:])))
    return movement.reshape(embedding(ids, flat), tuple(ids.shape) + tuple(operand.shape[1:]))


@converter("split")
def split(ctx, x):
    axis, sizes = int(ctx.params["axis"]), [int(s) for s in ctx.params["sizes"]]
    starts = np.cumsum([0] + sizes[:-1])
    return [indexing.getitem(x, (slice(None),) * axis + (slice(int(s), int(s) + n),)) for s, n in zip(starts, sizes)]


@converter("rev")
def rev(ctx, x):
    return movement.flip(x, tuple(int(d) for d in ctx.params["dimensions"]))
