"""GEMM-class ops through cuBLAS. ``matmul`` needs nothing of its own: ``cupy.matmul`` runs a
stack of matrices as one strided-batched GEMM. ``linear`` flattens the leading dims so a
(B, L, in) input is one (B·L, in) x (in, out) GEMM with the weight read transposed in place
(no copy), then adds the bias in place.
"""

from __future__ import annotations


def linear(generic):
    """CUDA kernel of ``linear``."""

    def run(xp, x, weight, bias=None):
        if x.ndim < 2:
            return generic(xp, x, weight, bias)
        out = xp.matmul(x.reshape(-1, x.shape[-1]), weight.T).reshape(x.shape[:-1] + (weight.shape[0],))
        if bias is not None:
            out += bias
        return out

    return run
