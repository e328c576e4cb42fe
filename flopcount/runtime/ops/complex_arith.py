"""Complex multiplication on the runtime's real tensors.

The runtime has no complex dtype: a complex tensor of shape S is held as a real tensor of shape
S + (2,), real and imaginary parts side by side, as ``torch.view_as_real`` lays it out (the
PyTorch importer lowers complex values this way, ``runtime/torch/complex.py``). Addition,
subtraction and scaling by a real number are then the ordinary elementwise ops; the product of
two complex numbers mixes the parts, so it is an op of its own.

Cost (COUNTING.md): (a + bi)(c + di) = (ac − bd) + (ad + bc)i, 4 real multiplies and 2 adds, so
6 FLOPs per complex output element (3 per real element of the output).
"""

from __future__ import annotations

__all__ = ["complex_mul"]

from .. import dtypes as _dt
from ..dispatch import apply
from ..errors import ShapeError
from ..registry import Op, Spec, io_cost, numel, register_op
from ._helpers import broadcast_shapes


def _check_layout(x, which: str) -> None:
    if x.ndim == 0 or x.shape[-1] != 2:
        raise ShapeError(f"complex_mul: {which} {x.shape} is not a complex tensor in the real layout "
                         f"(a last dim of 2: real, imaginary)")
    if not x.dtype.is_floating_point:
        raise ShapeError(f"complex_mul: {which} must be floating point, got {x.dtype.name}")


@register_op("complex_mul")
class ComplexMul(Op):
    """a · b, or a · conj(b) with ``conjugate``: a and b of shapes (..., 2), broadcast over the
    leading dims, in the real layout (``[..., 0]`` real parts, ``[..., 1]`` imaginary)."""

    def shape(a, b, *, conjugate):
        _check_layout(a, "a")
        _check_layout(b, "b")
        out = broadcast_shapes("complex_mul", a.shape[:-1], b.shape[:-1]) + (2,)
        return Spec(out, _dt.promote(a.dtype, b.dtype), a.device)

    def forward(xp, a, b, *, conjugate):
        ar, ai, br, bi = a[..., 0], a[..., 1], b[..., 0], b[..., 1]
        if conjugate:
            bi = -bi
        return xp.stack([ar * br - ai * bi, ar * bi + ai * br], axis=-1)

    def vjp(g, out, a, b, *, conjugate):
        # with <u, v> = Re(conj(u)·v): out = a·b gives da = g·conj(b), db = g·conj(a);
        # out = a·conj(b) gives da = g·b, db = a·conj(g)
        ga = complex_mul(g, b, conjugate=not conjugate) if a.requires_grad else None
        if not b.requires_grad:
            return ga, None
        gb = complex_mul(a, g, conjugate=True) if conjugate else complex_mul(g, a, conjugate=True)
        return ga, gb

    def cost(out, a, b, *, conjugate):
        return io_cost(out, (a, b), flops=3 * numel(out))  # 4 multiplies + 2 adds per complex element


def complex_mul(a, b, conjugate: bool = False):
    """The complex product of ``a`` and ``b`` (or ``a · conj(b)``), both in the real layout (..., 2).

    >>> complex_mul(rt.tensor([1.0, 2.0]), rt.tensor([3.0, 4.0])).tolist()   # (1 + 2i)(3 + 4i)
    [-5.0, 10.0]
    """
    return apply(ComplexMul, a, b, conjugate=bool(conjugate))
