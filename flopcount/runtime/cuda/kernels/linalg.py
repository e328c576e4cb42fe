"""GEMM-class ops through cuBLAS (``blas``): ``matmul`` (batched, broadcast batch dims) and
``linear`` in float16, bfloat16, float32 and float64, each one ``cublasGemmEx`` or
``cublasGemmStridedBatchedEx`` call. ``linear`` reads the weight transposed in place (no copy),
folds a (B, L, in) input into one (B·L, in) GEMM and adds the bias in the GEMM itself (the
output starts as the broadcast bias, beta = 1: added in float32 before the one rounding).
Other dtypes (integers) run the op's generic kernel (CuPy's matmul). A linear followed by a
ReLU or a tanh GELU, when nothing watches the two ops apart, runs as one cuBLASLt matmul
(``linear_activation``, ``cublaslt``).
"""

from __future__ import annotations

from . import blas, cublaslt


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


def activation_of(op_name: str, attrs: dict) -> str | None:
    """The cuBLASLt epilogue's name for the elementwise op ``op_name`` with ``attrs`` after a
    linear ("relu", "gelu_tanh"), or None where cuBLASLt has no such epilogue (the erf GELU:
    cuBLASLt's is the tanh approximation).

    >>> activation_of("relu", {}), activation_of("gelu", {"approximate": "tanh"})
    ('relu', 'gelu_tanh')
    >>> activation_of("gelu", {"approximate": "none"}) is None
    True
    """
    if op_name == "relu":
        return "relu"
    if op_name == "gelu" and attrs.get("approximate") == "tanh":
        return "gelu_tanh"
    return None


def linear_activation(linear_kernel, act_kernel, act_attrs: dict, activation: str):
    """The kernel of a linear and the activation after it: one cuBLASLt matmul whose epilogue
    adds the bias and applies ``activation``, or the two kernels one after the other where
    cuBLASLt does not take it."""

    def run(xp, x, weight, bias=None):
        y = cublaslt.linear_epilogue(xp, x, weight, bias, activation)
        if y is None:
            y = act_kernel(xp, linear_kernel(xp, x, weight, bias), **act_attrs)
        return y

    run.activation = activation  # what the step runs after its linear, for tests and readers
    return run
