"""Scatter with a reduction: ``scatter_elements`` (along one dim, ``torch.scatter_reduce``-like)
and ``scatter_nd`` (at index tuples). Positions not written keep ``x``'s values; with
``reduction`` "add", "mul", "max" or "min" every update is combined with what is there
(duplicates included), with "none" it replaces it (the last of duplicates wins, as numpy's
assignment; ONNX leaves that order undefined).

Cost (COUNTING.md): one FLOP per update element with a reduction, none for "none"; bytes of
the copy of ``x``, the indices and the updates.
"""

from __future__ import annotations

__all__ = ["scatter_elements", "scatter_nd"]

import numpy as np

from ..dispatch import apply
from ..errors import ShapeError, UnsupportedOpError
from ..registry import Op, Spec, io_cost, numel, register_op
from ._helpers import norm_dim

REDUCTIONS = ("none", "add", "mul", "max", "min")
_UFUNCS = {"add": "add", "mul": "multiply", "max": "maximum", "min": "minimum"}


def _check(op: str, x, index, updates, reduction: str) -> None:
    if reduction not in REDUCTIONS:
        raise ShapeError(f"{op}: reduction must be one of {REDUCTIONS}, got {reduction!r}")
    if index.dtype.is_floating_point or index.dtype.name == "bool":
        raise ShapeError(f"{op}: indices must hold integers, got {index.dtype.name}")
    if updates.dtype is not x.dtype:
        raise ShapeError(f"{op}: updates ({updates.dtype.name}) must have the dtype of the input ({x.dtype.name})")


def _write(xp, out, key, updates, reduction: str) -> None:
    if reduction == "none":
        out[key] = updates
    elif xp is np:
        getattr(np, _UFUNCS[reduction]).at(out, key, updates)
    else:  # CuPy has scatter_add, scatter_max and scatter_min (no multiply)
        import cupyx

        if reduction == "mul":
            raise UnsupportedOpError("scatter with reduction 'mul' has no CUDA kernel; run it on the CPU")
        getattr(cupyx, f"scatter_{_UFUNCS[reduction]}")(out, key, updates)


def _no_gradient(op: str, reduction: str):
    raise UnsupportedOpError(f"{op}: no gradient for reduction {reduction!r} (only 'none' and 'add')")


@register_op("scatter_elements")
class ScatterElements(Op):
    """out = x, then out[..., index[i], ...] (op)= updates[i] along ``dim`` (index and updates
    have one shape; negative indices count from the end)."""

    def shape(x, index, updates, *, dim, reduction):
        _check("scatter_elements", x, index, updates, reduction)
        norm_dim("scatter_elements", dim, x.ndim)
        if tuple(index.shape) != tuple(updates.shape) or index.ndim != x.ndim:
            raise ShapeError(f"scatter_elements: indices {index.shape} and updates {updates.shape} need one shape "
                             f"with the rank of the input {x.shape}")
        return Spec(x.shape, x.dtype, x.device)

    def forward(xp, x, index, updates, *, dim, reduction):
        d = dim % x.ndim
        out = x.copy()
        grids = list(xp.ix_(*(xp.arange(n) for n in index.shape)))
        grids[d] = xp.where(index < 0, index + x.shape[d], index)
        _write(xp, out, tuple(grids), updates, reduction)
        return out

    def vjp(g, out, x, index, updates, *, dim, reduction):
        from .elementwise import mul
        from .indexing import gather

        if reduction not in ("none", "add"):
            _no_gradient("scatter_elements", reduction)
        picked = gather(g, dim, index)
        gx = None
        if x.requires_grad:
            # replaced positions take no gradient: zero them through the same scatter
            gx = g if reduction == "add" else scatter_elements(g, dim, index, mul(picked, 0.0))
        return gx, None, (picked if updates.requires_grad else None)

    def cost(out, x, index, updates, *, dim, reduction):
        return io_cost(out, (x, index, updates), flops=0 if reduction == "none" else numel(updates))


@register_op("scatter_nd")
class ScatterND(Op):
    """out = x, then out[indices[j]] (op)= updates[j] for every index tuple j: ``indices``
    (..., k) addresses the first k dims; ``updates`` is indices.shape[:-1] + x.shape[k:]."""

    def shape(x, indices, updates, *, reduction):
        _check("scatter_nd", x, indices, updates, reduction)
        k = indices.shape[-1] if indices.ndim else 0
        want = tuple(indices.shape[:-1]) + tuple(x.shape[k:])
        if indices.ndim == 0 or k > x.ndim or tuple(updates.shape) != want:
            raise ShapeError(f"scatter_nd: indices {indices.shape} and updates {updates.shape} do not fit the "
                             f"input {x.shape} (updates must be {want})")
        return Spec(x.shape, x.dtype, x.device)

    def forward(xp, x, indices, updates, *, reduction):
        out = x.copy()
        k = indices.shape[-1]
        key = tuple(xp.where(indices[..., j] < 0, indices[..., j] + x.shape[j], indices[..., j]) for j in range(k))
        _write(xp, out, key, updates, reduction)
        return out

    def vjp(g, out, x, indices, updates, *, reduction):
        from .elementwise import mul
        from .indexing import Index

        if reduction not in ("none", "add"):
            _no_gradient("scatter_nd", reduction)
        k = indices.shape[-1]
        parts = [indices[(Ellipsis, j)] for j in range(k)]
        picked = apply(Index, g, *parts, items=[["t", j] for j in range(k)])
        gx = None
        if x.requires_grad:
            gx = g if reduction == "add" else scatter_nd(g, indices, mul(picked, 0.0))
        return gx, None, (picked if updates.requires_grad else None)

    def cost(out, x, indices, updates, *, reduction):
        return io_cost(out, (x, indices, updates), flops=0 if reduction == "none" else numel(updates))


def scatter_elements(x, dim: int, index, updates, reduction: str = "none"):
    """``x`` with ``updates`` written (or combined by ``reduction``) at ``index`` along ``dim``.

    >>> x = rt.zeros(3)
    >>> scatter_elements(x, 0, rt.tensor([0, 0]), rt.tensor([1.0, 2.0]), "add").tolist()
    [3.0, 0.0, 0.0]
    """
    return apply(ScatterElements, x, index, updates, dim=int(dim), reduction=reduction)


def scatter_nd(x, indices, updates, reduction: str = "none"):
    """``x`` with ``updates`` written (or combined by ``reduction``) at the index tuples ``indices``.

    >>> scatter_nd(rt.zeros(3), rt.tensor([[2]]), rt.tensor([5.0])).tolist()
    [0.0, 0.0, 5.0]
    """
    return apply(ScatterND, x, indices, updates, reduction=reduction)
