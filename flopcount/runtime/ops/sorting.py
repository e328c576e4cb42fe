"""Selection by order: ``topk`` (the k largest entries along a dim and where they are).

Cost: k passes of a running maximum over the dim, one comparison per element each; the values
and indices are written. Mixture-of-experts routers call it on a few experts per token, so the
choice of selection algorithm never matters for the totals.
"""

from __future__ import annotations

__all__ = ["topk"]  # the functional API (nn.functional re-exports it)

from .. import dtypes as _dt
from ..dispatch import apply
from ..errors import ShapeError
from ..registry import Op, Spec, io_cost, numel, register_op
from ._helpers import norm_dim
from .indexing import GatherBackward


@register_op("topk")
class TopK(Op):
    """(values, int64 indices) of the ``k`` largest entries along ``dim``, largest first; ties
    go to the lower index, as a stable sort gives them."""

    def shape(x, *, k, dim):
        if x.dtype is _dt.bool_:
            raise ShapeError("topk: input must be numeric, got bool")
        if not 0 <= k <= x.shape[dim]:
            raise ShapeError(f"topk: k must lie in [0, {x.shape[dim]}] for dim {dim} of shape {x.shape}, got {k}")
        shape = x.shape[:dim] + (k,) + x.shape[dim + 1:]
        return Spec(shape, x.dtype, x.device), Spec(shape, _dt.int64, x.device)

    def forward(xp, x, *, k, dim):
        order = xp.argsort(-x, axis=dim, kind="stable") if xp.__name__ == "numpy" else xp.argsort(-x, axis=dim)
        index = xp.take(order, xp.arange(k), axis=dim)
        return xp.take_along_axis(x, index, axis=dim), index.astype("int64")

    def vjp(g, out, x, *, k, dim):
        g_values, _ = g
        _, index = out
        return apply(GatherBackward, g_values, index, dim=dim, shape=tuple(x.shape))

    def cost(out, x, *, k, dim):
        return io_cost(out, (x,), flops=k * numel(x))  # k passes of one comparison per element


def topk(x, k: int, dim: int = -1):
    """``(values, indices)`` of the ``k`` largest entries of ``x`` along ``dim`` (torch.topk with
    ``largest=True, sorted=True``).

    >>> import flopcount.runtime as rt
    >>> values, indices = topk(rt.tensor([[0.1, 0.7, 0.2]]), 2)
    >>> indices.numpy().tolist()
    [[1, 2]]
    """
    return apply(TopK, x, k=int(k), dim=norm_dim("topk", dim, x.ndim))
