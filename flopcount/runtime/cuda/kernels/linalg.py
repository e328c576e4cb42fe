"""GEMM-class ops through cuBLAS (``blas``): ``matmul`` (batched, broadcast batch dims) and
``linear`` in float16, bfloat16, float32 and float64, each one ``cublasGemmEx`` or
``cublasGemmStridedBatchedEx`` call. ``linear`` reads the weight transposed in place (no copy),
folds a (B, L, in) input into one (B·L, in) GEMM and adds the bias in the GEMM itself (the
output starts as the broadcast bias, beta = 1: added in float32 before the one rounding).
Other dtypes (integers) run the op's generic kernel (CuPy's matmul).
"""

from __future__ import annotations

from . import blas


def matmul(generic):
    """CUDA kernel of ``matmul``."""

    def run(xp, a, b):
        out = blas.matmul(xp, a, b)
        return generic(xp, a, b) if out is None else out

    return run


def linear(generic):
    """CUDA kernel of ``linear``."""

    def run(xp, x, weight, bias=None):
        rows = x.reshape(1, x.shape[0]) if x.ndim == 1 else x
        out = blas.matmul(xp, rows, weight.T, bias)
        if out is None:
            return generic(xp, x, weight, bias)
        return out.reshape(x.shape[:-1] + (weight.shape[0],))

    return run
