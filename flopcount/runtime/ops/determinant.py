"""``det``: determinants of the trailing (n, n) matrices.

Cost (COUNTING.md): an LU factorization's n³/3 MACs per matrix (2n³/3 FLOPs), plus n
multiplies of the diagonal.
"""

from __future__ import annotations

__all__ = ["det"]

from ..dispatch import apply
from ..errors import ShapeError
from ..registry import Op, Spec, io_cost, numel, register_op
from ._helpers import check_float, upcast_half


@register_op("det", onnx="Det")
class Det(Op):
    def shape(x):
        check_float("det", x)
        if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
            raise ShapeError(f"det: expects (..., n, n) matrices, got {x.shape}")
        return Spec(tuple(x.shape[:-2]), x.dtype, x.device)

    def forward(xp, x):
        return xp.linalg.det(upcast_half(x)).astype(x.dtype)

    def vjp(g, out, x):
        from .elementwise import mul
        from .movement import reshape, transpose

        # d det(X) / dX = det(X) · X⁻ᵀ, the inverse found by solving against the identity
        inverse = apply(_Inverse, x)
        scale = reshape(mul(g, out), tuple(out.shape) + (1, 1))
        return mul(scale, transpose(inverse, -1, -2))

    def cost(out, x):
        n = x.shape[-1]
        matrices = numel(out)
        macs = matrices * (n ** 3 // 3)
        return io_cost(out, (x,), macs=macs, flops=2 * macs + matrices * n)


@register_op("inverse")
class _Inverse(Op):
    """Matrix inverse of the trailing (n, n) matrices (det's gradient)."""

    def shape(x):
        check_float("inverse", x)
        if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
            raise ShapeError(f"inverse: expects (..., n, n) matrices, got {x.shape}")
        return Spec(tuple(x.shape), x.dtype, x.device)

    def forward(xp, x):
        return xp.linalg.inv(upcast_half(x)).astype(x.dtype)

    def vjp(g, out, x):
        from .linalg import matmul
        from .elementwise import neg
        from .movement import transpose

        # d X⁻¹ = −X⁻¹ dX X⁻¹
        inv_t = transpose(out, -1, -2)
        return neg(matmul(matmul(inv_t, g), inv_t))

    def cost(out, x):
        n = x.shape[-1]
        matrices = numel(out) // max(n * n, 1)
        macs = matrices * n ** 3  # LU (n³/3) and the solve against the identity (2n³/3)
        return io_cost(out, (x,), macs=macs, flops=2 * macs)


def det(x):
    """Determinants of ``x``'s trailing (n, n) matrices.

    >>> det(rt.tensor([[2.0, 0.0], [0.0, 3.0]])).item()
    6.0
    """
    return apply(Det, x)
