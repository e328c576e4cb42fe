"""Selection by value: ``topk``, ``sort``, ``nonzero`` and ``unique``.

``nonzero`` and ``unique`` have output sizes that depend on the values. Their shape rules give
the exact size when the input holds data (an eager run, or a graph running on real inputs) and
an upper bound on the meta device, where only shapes are known (a trace counts the bound: every
element nonzero, every element distinct). A graph traced on meta records the bound; running it
gives the exact sizes, which the following ops take as their shape rules compute them.

Cost (COUNTING.md): topk ⌈log₂ k⌉ + 1 comparisons per input element (a heap of k); sort ⌈log₂ n⌉
comparisons per element along a dim of n (a comparison sort's n·log₂ n per row); nonzero one
comparison per element; unique log₂ n comparisons per element (a sort).
"""

from __future__ import annotations

__all__ = ["topk", "sort", "nonzero", "unique"]

import math

import numpy as np

from .. import dtypes as _dt
from ..dispatch import apply
from ..errors import ShapeError
from ..registry import Op, Spec, io_cost, numel, register_op
from ._helpers import norm_dim


def _has_data(t) -> bool:
    return getattr(t, "data", None) is not None


def _descending_key(xp, x):
    """A key whose ascending order is ``x``'s descending order, so a stable sort keeps equal
    values in index order (ONNX's TopK: the lower index first)."""
    if x.dtype.kind == "f":
        return -x
    if x.dtype.kind == "b":
        return ~x
    return xp.invert(x)  # ~x reverses the order of signed and unsigned integers without overflow


@register_op("topk", ptflops="zero")
class TopK(Op):
    """The ``k`` largest (or smallest) elements along ``dim`` and their indices, sorted; equal
    values keep their index order."""

    def shape(x, *, k, dim, largest, sorted):
        d = norm_dim("topk", dim, x.ndim)
        if not 0 <= k <= x.shape[d]:
            raise ShapeError(f"topk: k={k} is out of range for dim {dim} of size {x.shape[d]} (input {x.shape})")
        out = x.shape[:d] + (k,) + x.shape[d + 1:]
        return Spec(out, x.dtype, x.device), Spec(out, _dt.int64, x.device)

    def forward(xp, x, *, k, dim, largest, sorted):
        d = dim % x.ndim
        key = _descending_key(xp, x) if largest else x
        order = xp.argsort(key, axis=d, kind="stable")
        index = xp.take(order, xp.arange(k), axis=d)
        return xp.take_along_axis(x, index, axis=d), index.astype(np.int64, copy=False)

    def vjp(g, out, x, *, k, dim, largest, sorted):
        from .indexing import GatherBackward

        g_values, _ = g
        if g_values is None:
            return None
        return apply(GatherBackward, g_values, out[1], dim=dim % x.ndim, shape=tuple(x.shape))

    def cost(out, x, *, k, dim, largest, sorted):
        return io_cost(out, (x,), flops=numel(x) * (math.ceil(math.log2(max(k, 1))) + 1))


@register_op("sort")
class Sort(Op):
    """The elements along ``dim`` in ascending (``descending``: descending) order, and where each
    came from; equal values keep their index order (a stable sort, as torch's ``stable=True``)."""

    def shape(x, *, dim, descending):
        norm_dim("sort", dim, x.ndim)
        return Spec(x.shape, x.dtype, x.device), Spec(x.shape, _dt.int64, x.device)

    def forward(xp, x, *, dim, descending):
        if x.ndim == 0:
            return x.copy(), xp.zeros((), dtype=np.int64)
        key = _descending_key(xp, x) if descending else x
        order = xp.argsort(key, axis=dim, kind="stable")
        return xp.take_along_axis(x, order, axis=dim), order.astype(np.int64, copy=False)

    def vjp(g, out, x, *, dim, descending):
        from .indexing import GatherBackward

        g_values, _ = g
        if g_values is None:
            return None
        return apply(GatherBackward, g_values, out[1], dim=dim % max(x.ndim, 1), shape=tuple(x.shape))

    def cost(out, x, *, dim, descending):
        n = x.shape[dim % x.ndim] if x.ndim else 1
        return io_cost(out, (x,), flops=numel(x) * math.ceil(math.log2(max(n, 1))))


@register_op("nonzero")
class NonZero(Op):
    """The indices of the nonzero elements, one row per dim: (ndim, count), in row-major order
    (ONNX's NonZero; ``torch.nonzero(x).T``). On meta, count is its bound numel(x)."""

    vjp = None  # integer output

    def shape(x):
        count = int(np.count_nonzero(np.asarray(x.data))) if _has_data(x) and x.device.type == "cpu" else None
        if count is None and _has_data(x):
            count = int(x.data.astype(bool).sum())  # an array of another device (CuPy)
        return Spec((len(x.shape), numel(x) if count is None else count), _dt.int64, x.device)

    def forward(xp, x):
        found = xp.nonzero(x)
        if not found:  # a 0-d input: one row-less index per nonzero element
            return xp.zeros((0, int(bool(x))), dtype=np.int64)
        return xp.stack(found).astype(np.int64, copy=False).reshape(len(found), -1)

    def cost(out, x):
        return io_cost(out, (x,), flops=numel(x))  # one comparison with zero per element


@register_op("unique")
class Unique(Op):
    """The distinct values of ``x`` (flattened, or distinct slices along ``dim``), sorted or in
    the order they first occur, with the index of each one's first occurrence, the index of
    every element's value among them, and their counts (ONNX's Unique)."""

    vjp = None  # a selection of values, not differentiated

    def shape(x, *, dim, sorted):
        d = None if dim is None else norm_dim("unique", dim, x.ndim)
        n = numel(x) if d is None else x.shape[d]
        if _has_data(x):
            n = len(_unique(np.asarray(x.data) if x.device.type == "cpu" else x.data.get(), d, sorted)[1])
        values = (n,) if d is None else x.shape[:d] + (n,) + x.shape[d + 1:]
        inverse = numel(x) if d is None else x.shape[d]
        dev = x.device
        return (Spec(values, x.dtype, dev), Spec((n,), _dt.int64, dev), Spec((inverse,), _dt.int64, dev),
                Spec((n,), _dt.int64, dev))

    def forward(xp, x, *, dim, sorted):
        host = x if xp is np else x.get()
        d = None if dim is None else dim % x.ndim
        values, first, inverse, counts = _unique(host, d, sorted)
        return tuple(xp.asarray(a) for a in (values, first, inverse, counts))

    def cost(out, x, *, dim, sorted):
        n = numel(x)
        return io_cost(out, (x,), flops=n * max(math.ceil(math.log2(max(n, 2))), 1))


def _unique(x: np.ndarray, dim, sorted_: bool) -> tuple:
    """(values, first index, inverse, counts) as numpy's unique, reordered by first occurrence
    unless ``sorted_``."""
    values, first, inverse, counts = np.unique(x, return_index=True, return_inverse=True, return_counts=True,
                                               axis=dim)
    inverse = inverse.reshape(-1)
    if not sorted_:
        order = np.argsort(first, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        values = np.take(values, order, axis=0 if dim is None else dim)
        first, counts, inverse = first[order], counts[order], rank[inverse]
    return values, first.astype(np.int64), inverse.astype(np.int64), counts.astype(np.int64)


def topk(x, k: int, dim: int = -1, largest: bool = True, sorted: bool = True):
    """(values, indices) of the ``k`` largest (``largest=False``: smallest) elements along ``dim``.

    >>> topk(rt.tensor([1.0, 3.0, 2.0]), 2)[1].tolist()
    [1, 2]
    """
    return apply(TopK, x, k=int(k), dim=int(dim), largest=bool(largest), sorted=bool(sorted))


def sort(x, dim: int = -1, descending: bool = False):
    """(values, indices) of ``x`` sorted along ``dim`` (stable: ties keep their index order).

    >>> sort(rt.tensor([3.0, 1.0, 2.0]))[1].tolist()
    [1, 2, 0]
    """
    return apply(Sort, x, dim=int(dim), descending=bool(descending))


def nonzero(x):
    """The (ndim, count) indices of the nonzero elements of ``x``.

    >>> nonzero(rt.tensor([[0, 1], [2, 0]])).tolist()
    [[0, 1], [1, 0]]
    """
    return apply(NonZero, x)


def unique(x, dim=None, sorted: bool = True):
    """(values, first indices, inverse indices, counts) of the distinct values of ``x``.

    >>> unique(rt.tensor([2, 1, 2]))[0].tolist()
    [1, 2]
    """
    return apply(Unique, x, dim=None if dim is None else int(dim), sorted=bool(sorted))
