"""``resample``: a weighted sum of source elements along one dim, with the taps given.

Every separable interpolation is this along each resized dim: nearest (one tap), linear (two),
cubic (four), and their antialiased forms (as many taps as the filter covers when downscaling).
``index`` (O, T) names the T source positions of each of the O outputs and ``weight`` (O, T)
their weights, so the op does exactly the arithmetic of the rule that made the taps; ONNX's
Resize and crop-and-resize use it where no ``upsample_*`` op of PyTorch's reads the same pixels.

Cost (COUNTING.md): 2·T − 1 FLOPs per output element (T multiplies, T − 1 adds).
"""

from __future__ import annotations

__all__ = ["resample"]

from .. import dtypes as _dt
from ..dispatch import apply
from ..errors import ShapeError
from ..registry import Op, Spec, io_cost, numel, register_op
from ._helpers import check_float, norm_dim, upcast_half


@register_op("resample")
class Resample(Op):
    """out[..., o, ...] = Σₜ weight[o, t] · x[..., index[o, t], ...] along ``dim``."""

    def shape(x, index, weight, *, dim):
        check_float("resample", x)
        d = norm_dim("resample", dim, x.ndim)
        if index.ndim != 2 or tuple(weight.shape) != tuple(index.shape):
            raise ShapeError(f"resample: index {index.shape} and weight {weight.shape} must both be (outputs, taps)")
        if index.dtype is not _dt.int64 or not weight.dtype.is_floating_point:
            raise ShapeError(f"resample: index must be int64 and weight floating, got {index.dtype.name} "
                             f"and {weight.dtype.name}")
        return Spec(x.shape[:d] + (index.shape[0],) + x.shape[d + 1:], x.dtype, x.device)

    def forward(xp, x, index, weight, *, dim):
        d = dim % x.ndim
        work = upcast_half(x)
        view = (1,) * d + (-1,) + (1,) * (x.ndim - d - 1)
        out = None
        for t in range(index.shape[1]):  # one pass per tap: the output, not T copies of it
            term = xp.take(work, index[:, t], axis=d) * weight[:, t].astype(work.dtype).reshape(view)
            out = term if out is None else out + term
        if out is None:
            shape = list(x.shape)
            shape[d] = index.shape[0]
            return xp.zeros(shape, dtype=x.dtype)
        return out.astype(x.dtype, copy=False)

    def vjp(g, out, x, index, weight, *, dim):
        # the transpose of the (O, size) interpolation matrix, built from the taps with ops
        from .elementwise import cast, eq, mul
        from .linalg import matmul
        from .movement import reshape, transpose
        from .reduction import sum as sum_
        from ..factories import arange

        d = dim % x.ndim
        size = x.shape[d]
        hits = eq(reshape(index, index.shape + (1,)), arange(size, device=index.device))  # (O, T, size)
        matrix = sum_(mul(cast(hits, g.dtype), reshape(cast(weight, g.dtype), weight.shape + (1,))), 1)
        moved = transpose(g, d, -1)
        return transpose(matmul(moved, matrix), d, -1), None, None

    def cost(out, x, index, weight, *, dim):
        taps = index.shape[1]
        return io_cost(out, (x, index, weight), flops=max(2 * taps - 1, 0) * numel(out))


def resample(x, index, weight, dim: int):
    """Interpolate ``x`` along ``dim`` with the taps ``index`` (O, T) and ``weight`` (O, T).

    >>> import numpy as np
    >>> x = rt.tensor([[0.0, 10.0, 20.0]])
    >>> i, w = rt.tensor(np.array([[0, 1], [1, 2]])), rt.tensor([[0.5, 0.5], [0.5, 0.5]])
    >>> resample(x, i, w, 1).tolist()
    [[5.0, 15.0]]
    """
    return apply(Resample, x, index, weight, dim=int(dim))
