"""``dft``: the discrete Fourier transform along one dim, on signals held as real pairs.

A signal is (..., n, 1) for real values or (..., n, 2) for (real, imaginary) pairs, as ONNX's
DFT holds them; the result is (..., m, 2), m the transform length (n // 2 + 1 ``onesided``).
``inverse`` computes the inverse transform (1/m scaled); an inverse of a one-sided spectrum
gives the real signal (..., length, 1).

Cost (COUNTING.md): 5·L·log₂L FLOPs per transform of length L (the radix-2 FFT's count), times
the number of transforms.
"""

from __future__ import annotations

__all__ = ["dft"]

import math


from ..dispatch import apply
from ..errors import ShapeError
from ..registry import Op, Spec, io_cost, register_op
from ._helpers import check_float, norm_dim


@register_op("dft")
class Dft(Op):
    def shape(x, *, dim, length, inverse, onesided):
        check_float("dft", x)
        d = norm_dim("dft", dim, x.ndim)
        if x.ndim < 2 or x.shape[-1] not in (1, 2) or d == x.ndim - 1:
            raise ShapeError(f"dft: expects (..., n, 1 or 2) pairs transformed along another dim, got {x.shape} "
                             f"and dim {dim}")
        if length < 1:
            raise ShapeError(f"dft: the transform length must be positive, got {length}")
        shape = list(x.shape)
        if inverse and onesided:
            shape[d], shape[-1] = length, 1
        else:
            shape[d], shape[-1] = (length // 2 + 1 if onesided else length), 2
        return Spec(tuple(shape), x.dtype, x.device)

    def forward(xp, x, *, dim, length, inverse, onesided):
        d = dim % x.ndim
        signal = x[..., 0] if x.shape[-1] == 1 else x[..., 0] + 1j * x[..., 1]
        if inverse and onesided:
            return xp.fft.irfft(signal, n=length, axis=d)[..., None].astype(x.dtype)
        out = (xp.fft.ifft if inverse else xp.fft.fft)(signal, n=length, axis=d)
        if onesided:
            out = xp.take(out, xp.arange(length // 2 + 1), axis=d)
        return xp.stack([out.real, out.imag], axis=-1).astype(x.dtype)

    vjp = None  # spectral ops are imported for inference; no gradient yet

    def cost(out, x, *, dim, length, inverse, onesided):
        d = dim % x.ndim
        transforms = math.prod(n for i, n in enumerate(x.shape[:-1]) if i != d)
        return io_cost(out, (x,), flops=int(5 * length * math.log2(max(length, 2))) * transforms)


def dft(x, dim: int, length: int, inverse: bool = False, onesided: bool = False):
    """The DFT of the (..., n, 1 or 2) signal ``x`` along ``dim`` at ``length`` points.

    >>> dft(rt.tensor([[1.0], [0.0], [0.0], [0.0]]), 0, 4).tolist()
    [[1.0, 0.0], [1.0, 0.0], [1.0, 0.0], [1.0, 0.0]]
    """
    return apply(Dft, x, dim=int(dim), length=int(length), inverse=bool(inverse), onesided=bool(onesided))


