"""Boxing: the ops the sharding pass inserts where a value's SBP is not the one its consumer
needs (OneFlow's "boxing"). Each is one rank's view of a collective over the ranks of one mesh
axis: its shape rule maps the rank's local shape, its cost rule says how many bytes the rank
sends over that axis, and ``collective`` gives every rank's result from every rank's input, so
a mesh of per-rank graphs can be run in one process.

| op | SBP | bytes each rank sends (ring algorithms, NCCL's bus-bandwidth model) |
| --- | --- | --- |
| all_reduce | P -> B | 2·(n − 1)/n · bytes of the value |
| reduce_scatter | P -> S(d) | (n − 1)/n · bytes of the whole value |
| all_gather | S(d) -> B | (n − 1)/n · bytes of the whole value |
| all_to_all | S(a) -> S(b) | (n − 1)/n · bytes of the rank's slice |
| send_recv | one pipeline stage to the next | the bytes of the value |
| local_slice | B -> S(d) | 0 (each rank keeps its slice) |
| to_partial | B -> P | 0 (rank 0 keeps the value, the others zeros) |

The reductions' adds are not counted as FLOPs: a collective is priced by the bytes it moves.
A collective has no gradient rule: the sharding pass runs on training graphs that already
hold their backward, whose own boxing it inserts.

    >>> import numpy as np
    >>> parts = [np.ones(2), 2 * np.ones(2)]
    >>> [a.tolist() for a in AllReduce.collective(np, parts, axis="tp", n=2)]
    [[3.0, 3.0], [3.0, 3.0]]
"""

from __future__ import annotations

from ..errors import ShapeError
from ..registry import Cost, Op, Spec, nbytes, register_op
from ..sbp import Split, slice_of

__all__ = ["CommCost", "AllReduce", "ReduceScatter", "AllGather", "AllToAll", "SendRecv", "LocalSlice",
           "ToPartial", "COLLECTIVES"]


class CommCost(Cost):
    """A Cost with the traffic of a collective: ``sent`` bytes per rank over mesh ``axis``."""

    __slots__ = ("kind", "axis", "sent")

    def __init__(self, kind: str, axis: str, sent: int, bytes_read: int = 0, bytes_written: int = 0):
        super().__init__(0, 0, bytes_read, bytes_written)
        self.kind, self.axis, self.sent = kind, axis, sent

    def __repr__(self) -> str:
        return f"CommCost({self.kind} on {self.axis}: {self.sent} bytes sent per rank)"


def _resized(x, dim: int, size: int) -> Spec:
    return Spec(tuple(size if d == dim else s for d, s in enumerate(x.shape)), x.dtype, x.device)


def _check_dim(op: str, x, dim: int) -> None:
    if not 0 <= dim < x.ndim:
        raise ShapeError(f"{op}: dim {dim} is out of range for a local shape {x.shape}")


def _one_rank(op: str, x, n: int):
    # one rank alone (a group of one) is the identity; a real group needs every rank's input
    if n != 1:
        raise ShapeError(f"{op}: a collective over {n} ranks runs on every rank's value at once "
                         f"(flopcount.parallel.execute), not one rank's")
    return x


class _Collective(Op):
    """Shared by the boxing ops: no gradient rule, an identity kernel for a group of one."""

    vjp = None  # inserted into graphs that already hold their backward (see the module docstring)
    kind = "?"

    def forward(xp, x, **attrs):
        return _one_rank("boxing", x, attrs["n"]).copy()


@register_op("all_reduce")
class AllReduce(_Collective):
    """P -> B: every rank gets the sum of every rank's value."""

    kind = "all_reduce"

    def shape(x, *, axis, n):
        return Spec(tuple(x.shape), x.dtype, x.device)

    def cost(out, x, *, axis, n):
        return CommCost("all_reduce", axis, 2 * (n - 1) * nbytes(x) // n, nbytes(x), nbytes(out))

    @staticmethod
    def collective(xp, xs, *, axis, n):
        total = sum(xs[1:], xs[0].copy())
        return [total.copy() for _ in xs]


@register_op("reduce_scatter")
class ReduceScatter(_Collective):
    """P -> S(dim, blocks): every rank gets its slice of the sum."""

    kind = "reduce_scatter"

    def shape(x, *, axis, n, dim, blocks=1):
        _check_dim("reduce_scatter", x, dim)
        if x.shape[dim] % (n * blocks):
            raise ShapeError(f"reduce_scatter: dim {dim} of {x.shape} does not split into {n} ranks "
                             f"x {blocks} blocks")
        return _resized(x, dim, x.shape[dim] // n)

    def cost(out, x, *, axis, n, dim, blocks=1):
        return CommCost("reduce_scatter", axis, (n - 1) * nbytes(x) // n, nbytes(x), nbytes(out))

    @staticmethod
    def collective(xp, xs, *, axis, n, dim, blocks=1):
        total = sum(xs[1:], xs[0].copy())
        return [_take(xp, total, dim, Split(dim, blocks), n, r) for r in range(n)]


@register_op("all_gather")
class AllGather(_Collective):
    """S(dim, blocks) -> B: every rank gets the whole value from the ranks' slices."""

    kind = "all_gather"

    def shape(x, *, axis, n, dim, blocks=1):
        _check_dim("all_gather", x, dim)
        return _resized(x, dim, x.shape[dim] * n)

    def cost(out, x, *, axis, n, dim, blocks=1):
        return CommCost("all_gather", axis, (n - 1) * nbytes(out) // n, nbytes(x), nbytes(out))

    @staticmethod
    def collective(xp, xs, *, axis, n, dim, blocks=1):
        whole = _join(xp, xs, dim, blocks)
        return [whole.copy() for _ in xs]


@register_op("all_to_all")
class AllToAll(_Collective):
    """S(gather_dim) -> S(scatter_dim): each rank sends the other ranks their parts."""

    kind = "all_to_all"

    def shape(x, *, axis, n, gather_dim, scatter_dim):
        _check_dim("all_to_all", x, gather_dim)
        _check_dim("all_to_all", x, scatter_dim)
        if x.shape[scatter_dim] % n:
            raise ShapeError(f"all_to_all: dim {scatter_dim} of {x.shape} does not split into {n} ranks")
        return _resized(_resized(x, gather_dim, x.shape[gather_dim] * n), scatter_dim, x.shape[scatter_dim] // n)

    def cost(out, x, *, axis, n, gather_dim, scatter_dim):
        return CommCost("all_to_all", axis, (n - 1) * nbytes(x) // n, nbytes(x), nbytes(out))

    @staticmethod
    def collective(xp, xs, *, axis, n, gather_dim, scatter_dim):
        whole = _join(xp, xs, gather_dim, 1)
        return [_take(xp, whole, scatter_dim, Split(scatter_dim), n, r) for r in range(n)]


@register_op("send_recv")
class SendRecv(_Collective):
    """A value passed from one pipeline stage to the next (``axis`` names the pipeline)."""

    kind = "send_recv"

    def shape(x, *, axis, n, src, dst):
        return Spec(tuple(x.shape), x.dtype, x.device)

    def cost(out, x, *, axis, n, src, dst):
        return CommCost("send_recv", axis, nbytes(x), nbytes(x), nbytes(out))

    def forward(xp, x, *, axis, n, src, dst):
        return x.copy()  # in one process the receiving stage reads the sender's array

    @staticmethod
    def collective(xp, xs, *, axis, n, src, dst):
        return [x.copy() for x in xs]


@register_op("local_slice")
class LocalSlice(_Collective):
    """B -> S(dim, blocks): rank ``index`` keeps its slice; nothing is sent."""

    kind = "local_slice"

    def shape(x, *, axis, n, dim, blocks=1, index=0):
        _check_dim("local_slice", x, dim)
        if x.shape[dim] % (n * blocks):
            raise ShapeError(f"local_slice: dim {dim} of {x.shape} does not split into {n} ranks x {blocks} blocks")
        return _resized(x, dim, x.shape[dim] // n)

    def forward(xp, x, *, axis, n, dim, blocks=1, index=0):
        return _take(xp, x, dim, Split(dim, blocks), n, index)

    def cost(out, x, *, axis, n, dim, blocks=1, index=0):
        return CommCost("local_slice", axis, 0, nbytes(out), nbytes(out))

    @staticmethod
    def collective(xp, xs, *, axis, n, dim, blocks=1, index=0):
        return [_take(xp, x, dim, Split(dim, blocks), n, r) for r, x in enumerate(xs)]


@register_op("to_partial")
class ToPartial(_Collective):
    """B -> P: rank 0 keeps the value and the others hold zeros, so the ranks sum to it (a
    bias added once after a row-parallel layer's partial sums)."""

    kind = "to_partial"

    def shape(x, *, axis, n, index=0):
        return Spec(tuple(x.shape), x.dtype, x.device)

    def forward(xp, x, *, axis, n, index=0):
        return x.copy() if index == 0 else xp.zeros_like(x)

    def cost(out, x, *, axis, n, index=0):
        return CommCost("to_partial", axis, 0, nbytes(x), nbytes(out))

    @staticmethod
    def collective(xp, xs, *, axis, n, index=0):
        return [x.copy() if r == 0 else xp.zeros_like(x) for r, x in enumerate(xs)]


def _take(xp, whole, dim: int, sbp: Split, n: int, index: int):
    """Rank ``index``'s slice of ``whole`` under ``sbp``."""
    runs = slice_of(whole.shape[dim], sbp, n, index)
    parts = [xp.take(whole, xp.arange(a, b), axis=dim) for a, b in runs]
    return parts[0] if len(parts) == 1 else xp.concatenate(parts, axis=dim)


def _join(xp, parts: list, dim: int, blocks: int):
    """The whole value from the ranks' slices (block by block for a block-wise split)."""
    if blocks == 1:
        return xp.concatenate(parts, axis=dim)
    per_rank = [xp.split(p, blocks, axis=dim) for p in parts]
    return xp.concatenate([chunks[b] for b in range(blocks) for chunks in per_rank], axis=dim)


COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all", "send_recv")
