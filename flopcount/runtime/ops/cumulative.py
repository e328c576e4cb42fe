"""``cumprod``: running products along a dim (``cumsum`` is in ``reduction.py``).

Cost (COUNTING.md): one multiply per element.
"""

from __future__ import annotations

__all__ = ["cumprod"]

from .. import dtypes as _dt
from ..dispatch import apply
from ..registry import Op, Spec, io_cost, numel, register_op
from ._helpers import norm_dim


@register_op("cumprod")
class Cumprod(Op):
    def shape(x, *, dim):
        norm_dim("cumprod", dim, x.ndim)
        return Spec(x.shape, x.dtype if x.dtype.is_floating_point else _dt.int64, x.device)

    def forward(xp, x, *, dim):
        return xp.cumprod(x, axis=dim)

    def vjp(g, out, x, *, dim):
        from .elementwise import div, mul
        from .movement import flip
        from .reduction import cumsum

        # d out_j / d x_i = out_j / x_i for j >= i: a reversed running sum of g·out, over x
        # (inputs with zeros are not handled, as in simple kernels)
        return div(flip(cumsum(flip(mul(g, out), (dim,)), dim), (dim,)), x)

    def cost(out, x, *, dim):
        return io_cost(out, (x,), flops=numel(x))


def cumprod(x, dim: int):
    """Running products of ``x`` along ``dim``.

    >>> cumprod(rt.tensor([1.0, 2.0, 3.0]), 0).tolist()
    [1.0, 2.0, 6.0]
    """
    return apply(Cumprod, x, dim=int(dim))
