"""GEMMs through cuBLAS's mixed-precision entry points, in every float dtype.

``cupy.matmul`` has no bfloat16, and it picks its own compute type; here every GEMM of the
CUDA kernels (matmul, batched matmul with broadcast batch dims, linear and its bias) is one
``cublasGemmEx`` or ``cublasGemmStridedBatchedEx`` call with the types written out: float16
and bfloat16 operands and result (16-bit storage, never widened) with float32 accumulation,
float32 with float32 accumulation, or TF32 tensor cores when asked (``settings.allow_tf32``,
off by default as PyTorch's ``torch.backends.cuda.matmul.allow_tf32``; the environment variable
``FLOPCOUNT_ALLOW_TF32=1`` turns it on), float64 in float64.

cuBLAS is column-major and our arrays are row-major: a row-major C = A·B is the column-major
Cᵀ = Bᵀ·Aᵀ, so cuBLAS's first operand is our ``b`` and its second our ``a``, with its m and n
swapped. A row-major matrix whose rows are contiguous is its own transpose to cuBLAS (op N,
leading dimension the row stride); one whose columns are contiguous (``weight.T``) is read
transposed (op T, leading dimension the column stride), so neither is copied. A stack of
matrices needs one batch stride; broadcast batch dims have stride 0. A stack of rows times one
matrix (linear's (B, L, in) input) folds into one tall GEMM.

The argument construction is pure (``plan``), so it is tested without a GPU, and
``reference_gemm`` is cuBLAS's strided-batched GEMM on flat numpy buffers (column-major
semantics, its argument checks, float32 accumulation): handed numpy arrays, ``matmul`` runs its
plan through it, so every op example checks that the plan computes A·B.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from math import prod

import numpy as np

from . import _source, paths

# cuBLAS's and CUDA's enum values (cublas_api.h, library_types.h); tests/runtime/cuda checks
# them against CuPy's bindings
OP_N, OP_T = 0, 1
CUDA_R_32F, CUDA_R_64F, CUDA_R_16F, CUDA_R_16BF = 0, 1, 2, 14
COMPUTE_32F, COMPUTE_64F, COMPUTE_32F_FAST_TF32 = 68, 70, 77
GEMM_DEFAULT = -1
INT_MAX = 2**31 - 1  # cuBLAS takes sizes, leading dims and the batch count as 32-bit ints

DATA_TYPES = {"float16": CUDA_R_16F, "bfloat16": CUDA_R_16BF, "float32": CUDA_R_32F, "float64": CUDA_R_64F}


class Settings:
    """How float32 GEMMs run: ``allow_tf32`` (default False, or ``FLOPCOUNT_ALLOW_TF32=1``)
    lets cuBLAS round float32 operands to TF32 on tensor cores, as PyTorch's
    ``torch.backends.cuda.matmul.allow_tf32``.

    >>> import flopcount.runtime as rt
    >>> rt.cuda.matmul.allow_tf32
    False
    """

    def __init__(self):
        self.allow_tf32 = os.environ.get("FLOPCOUNT_ALLOW_TF32", "0") not in ("", "0")


settings = Settings()


@dataclass(frozen=True)
class Operand:
    """A stack of matrices as cuBLAS reads it: ``op`` (OP_N or OP_T), leading dimension ``ld``
    and ``stride`` between matrices, in elements."""

    op: int
    ld: int
    stride: int


@dataclass(frozen=True)
class GemmPlan:
    """The arguments of ``cublasGemmStridedBatchedEx`` (``batch`` = 1: ``cublasGemmEx``), in
    cuBLAS's terms: C (m x n, column-major) = alpha·op(A)·op(B) + beta·C, where cuBLAS's A is
    the row-major product's right operand and its B the left one."""

    transa: int
    transb: int
    m: int
    n: int
    k: int
    lda: int
    ldb: int
    ldc: int
    stride_a: int
    stride_b: int
    stride_c: int
    batch: int
    data_type: int
    compute_type: int
    beta: float = 0.0
    algo: int = GEMM_DEFAULT


def compute_type(dtype, allow_tf32: bool = False) -> int:
    """cuBLAS's compute type for operands of ``dtype``: float32 accumulation for the halves and
    float32 (TF32 only when allowed), float64 for float64.

    >>> compute_type("bfloat16") == COMPUTE_32F, compute_type("float32", allow_tf32=True) == COMPUTE_32F_FAST_TF32
    (True, True)
    """
    name = _source.dtype_name(dtype)
    if name == "float64":
        return COMPUTE_64F
    if name == "float32" and allow_tf32:
        return COMPUTE_32F_FAST_TF32
    return COMPUTE_32F


def matrix_operand(rows: int, cols: int, row_stride: int, col_stride: int, batch_stride: int) -> Operand | None:
    """How cuBLAS reads the transpose of a row-major-indexed (rows x cols) matrix whose element
    (i, j) is at ``i·row_stride + j·col_stride``: op N when rows are contiguous, op T when
    columns are, None when neither (the caller copies). A stride along a dim of size 1 is
    free, so it is set to what cuBLAS accepts.

    >>> matrix_operand(4, 3, 3, 1, 12)       # C-contiguous (4, 3): its transpose, ld 3
    Operand(op=0, ld=3, stride=12)
    >>> matrix_operand(3, 4, 1, 3, 0)        # weight.T of a (4, 3) weight: read transposed
    Operand(op=1, ld=3, stride=0)
    """
    if min(row_stride, col_stride, batch_stride) < 0:
        return None
    if col_stride == 1 or cols == 1:  # stored column-major as the (cols x rows) transpose
        ld = row_stride if rows > 1 else max(1, cols)
        if ld >= max(1, cols):
            return Operand(OP_N, ld, batch_stride)
    if row_stride == 1 or rows == 1:  # stored column-major as the (rows x cols) matrix itself
        ld = col_stride if cols > 1 else max(1, rows)
        if ld >= max(1, rows):
            return Operand(OP_T, ld, batch_stride)
    return None


def batch_stride(batch_shape: tuple, strides: tuple) -> int | None:
    """The one stride that walks a stack's matrices in the row-major order of ``batch_shape``
    (the broadcast batch dims; ``strides`` holds 0 where the operand is broadcast), or None
    when no single stride does.

    >>> batch_stride((2, 3), (36, 12)), batch_stride((2, 3), (0, 0)), batch_stride((2, 3), (12, 0))
    (12, 0, None)
    """
    dims = [(n, s) for n, s in zip(batch_shape, strides) if n > 1]
    if not dims:
        return 0
    step = dims[-1][1]
    inner = 1
    for n, s in reversed(dims):
        if s != step * inner:
            return None
        inner *= n
    return step


def element_strides(array) -> tuple | None:
    """An array's strides in elements (None when one is not a whole number of them)."""
    size = array.dtype.itemsize
    if any(s % size for s in array.strides):
        return None
    return tuple(s // size for s in array.strides)


def operand_of(shape: tuple, strides: tuple, batch: tuple) -> Operand | None:
    """The ``Operand`` of a (..., rows, cols) array of ``shape``/element ``strides`` broadcast
    to the batch dims ``batch``; None when it needs a copy first."""
    lead = len(batch) - (len(shape) - 2)
    full = [0] * lead + [0 if n == 1 else s for n, s in zip(shape[:-2], strides[:-2])]
    step = batch_stride(batch, tuple(full))
    if step is None:
        return None
    return matrix_operand(shape[-2], shape[-1], strides[-2], strides[-1], step)


def plan(a: Operand, b: Operand, m: int, k: int, n: int, batch: int, dtype, *, bias: bool = False,
         allow_tf32: bool = False) -> GemmPlan:
    """The cuBLAS call computing the row-major (batch, m, n) C-contiguous ``a @ b`` (+ what C
    holds when ``bias``: the bias broadcast there first, beta = 1), from the two operands as
    cuBLAS reads them. A stack of rows times one matrix (``b.stride`` 0, ``a`` op N with its
    matrices one after the other) is one GEMM of batch·m rows.

    >>> a, w = Operand(OP_N, 64, 8 * 64), Operand(OP_T, 64, 0)     # x (4, 8, 64) @ weight(32, 64).T
    >>> p = plan(a, w, m=8, k=64, n=32, batch=4, dtype="bfloat16", bias=True)
    >>> (p.transa, p.transb, p.m, p.n, p.k, p.lda, p.ldb, p.ldc, p.batch, p.beta)
    (1, 0, 32, 32, 64, 64, 64, 32, 1, 1.0)
    """
    name = _source.dtype_name(dtype)
    if batch > 1 and b.stride == 0 and a.op == OP_N and a.stride == m * a.ld:
        m, batch = m * batch, 1
    if batch == 1:
        a, b = Operand(a.op, a.ld, 0), Operand(b.op, b.ld, 0)
    return GemmPlan(transa=b.op, transb=a.op, m=n, n=m, k=k, lda=b.ld, ldb=a.ld, ldc=max(1, n),
                    stride_a=b.stride, stride_b=a.stride, stride_c=m * n if batch > 1 else 0, batch=batch,
                    data_type=DATA_TYPES[name], compute_type=compute_type(name, allow_tf32),
                    beta=1.0 if bias else 0.0)


# --- cuBLAS's semantics on numpy ---------------------------------------------------------------

class GemmArgumentError(ValueError):
    """Arguments cuBLAS would refuse (CUBLAS_STATUS_INVALID_VALUE) or an address outside a buffer."""


def _op_indices(trans: int, rows: int, cols: int, ld: int, stride: int, batch: int) -> np.ndarray:
    """Flat indices of op(X) (batch, rows, cols) in a column-major stored X."""
    i = np.arange(rows)[:, None]
    j = np.arange(cols)[None, :]
    within = i + j * ld if trans == OP_N else j + i * ld
    return np.arange(batch)[:, None, None] * stride + within[None]


def reference_gemm(p: GemmPlan, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> None:
    """``cublasGemmStridedBatchedEx`` with plan ``p`` on flat buffers ``a``, ``b``, ``c`` (1-d,
    cuBLAS's A, B, C), alpha = 1: C = op(A)·op(B) + beta·C per matrix, accumulated in the
    compute type and stored in C's dtype. Refuses what cuBLAS refuses (a leading dimension
    below the stored rows) and any address outside a buffer, as a GPU would read or write
    memory that is not the operand's.

    >>> A, B, C = np.arange(6.0), np.arange(6.0), np.zeros(4)  # column-major 2x3 times 3x2
    >>> reference_gemm(plan(Operand(OP_N, 3, 0), Operand(OP_N, 2, 0), 2, 3, 2, 1, "float64"), A, B, C)
    >>> C.reshape(2, 2)  # row-major [[0,1,2],[3,4,5]] @ [[0,1],[2,3],[4,5]]
    array([[10., 13.],
           [28., 40.]])
    """
    rows_a = p.m if p.transa == OP_N else p.k
    rows_b = p.k if p.transb == OP_N else p.n
    if min(p.m, p.n, p.k, p.batch) < 0 or p.transa not in (OP_N, OP_T) or p.transb not in (OP_N, OP_T):
        raise GemmArgumentError(f"invalid GEMM sizes or ops: {p}")
    for name, ld, rows in (("lda", p.lda, rows_a), ("ldb", p.ldb, rows_b), ("ldc", p.ldc, p.m)):
        if ld < max(1, rows):
            raise GemmArgumentError(f"{name} = {ld} is below max(1, {rows}) (cuBLAS refuses it): {p}")
    acc = np.float64 if p.compute_type == COMPUTE_64F else np.float32
    ia = _op_indices(p.transa, p.m, p.k, p.lda, p.stride_a, p.batch)
    ib = _op_indices(p.transb, p.k, p.n, p.ldb, p.stride_b, p.batch)
    ic = _op_indices(OP_N, p.m, p.n, p.ldc, p.stride_c, p.batch)
    for name, idx, buf in (("A", ia, a), ("B", ib, b), ("C", ic, c)):
        if idx.size and (idx.min() < 0 or idx.max() >= buf.size):
            raise GemmArgumentError(f"{name} is addressed at element {int(idx.max())} of a buffer of {buf.size}: {p}")
    if ic.size and len(np.unique(ic)) != ic.size:
        raise GemmArgumentError(f"two elements of C share an address: {p}")
    product = np.matmul(a[ia].astype(acc), b[ib].astype(acc))
    if p.beta:
        product += acc(p.beta) * c[ic].astype(acc)
    c[ic] = product.astype(c.dtype)


def footprint(array) -> np.ndarray:
    """The 1-d view of the memory a numpy view with non-negative strides spans, from its first
    element to its last: the buffer a device pointer to it would let cuBLAS address."""
    strides = element_strides(array)
    extent = 1 + sum((n - 1) * s for n, s in zip(array.shape, strides)) if array.size else 0
    return np.lib.stride_tricks.as_strided(array, shape=(extent,), strides=(array.dtype.itemsize,), writeable=False)


# --- the launcher --------------------------------------------------------------------------------

def device_pointer(array) -> int:
    """A CuPy array's device address."""
    return array.data.ptr


def _cublas_gemm(xp, p: GemmPlan, a, b, c) -> None:
    """One cuBLAS call of plan ``p``: cuBLAS's A is ``b``, its B is ``a``."""
    paths.ran(paths.CUBLAS)
    cublas = xp.cuda.cublas
    handle = xp.cuda.device.get_cublas_handle()
    cublas.setStream(handle, xp.cuda.get_current_stream().ptr)
    scalar = np.float64 if p.compute_type == COMPUTE_64F else np.float32
    alpha, beta = np.array(1, dtype=scalar), np.array(p.beta, dtype=scalar)  # host pointers, alive for the call
    t = p.data_type
    pa, pb, pc = device_pointer(b), device_pointer(a), device_pointer(c)
    if p.batch == 1:
        cublas.gemmEx(handle, p.transa, p.transb, p.m, p.n, p.k, alpha.ctypes.data, pa, t, p.lda,
                      pb, t, p.ldb, beta.ctypes.data, pc, t, p.ldc, p.compute_type, p.algo)
    else:
        cublas.gemmStridedBatchedEx(handle, p.transa, p.transb, p.m, p.n, p.k, alpha.ctypes.data,
                                    pa, t, p.lda, p.stride_a, pb, t, p.ldb, p.stride_b,
                                    beta.ctypes.data, pc, t, p.ldc, p.stride_c, p.batch,
                                    p.compute_type, p.algo)


def _as_operand(xp, x, batch: tuple):
    """(array, Operand) of one GEMM operand, copied to C order when cuBLAS cannot read it as it is."""
    strides = element_strides(x)
    found = None if strides is None else operand_of(x.shape, strides, batch)
    if found is None:
        x = xp.ascontiguousarray(xp.broadcast_to(x, batch + x.shape[-2:]))
        found = operand_of(x.shape, element_strides(x), batch)
    return x, found


def matmul(xp, a, b, bias=None):
    """``a @ b`` (+ ``bias`` over the last dim) for (..., m, k) and (..., k, n) arrays of one
    float dtype with broadcast batch dims, by one cuBLAS GEMM; None for what it does not take
    (other dtypes, a 1-d operand, a size beyond cuBLAS's 32-bit ints), which the caller runs
    another way. Handed numpy arrays, the
    same plan runs through ``reference_gemm``.

    >>> a, b = np.arange(6.0).reshape(2, 3), np.arange(6.0).reshape(3, 2)
    >>> matmul(np, a, b, bias=np.array([1.0, -1.0]))
    array([[11., 12.],
           [29., 39.]])
    """
    name = _source.dtype_name(a.dtype)
    if a.ndim < 2 or b.ndim < 2 or a.dtype != b.dtype or name not in DATA_TYPES \
            or (bias is not None and bias.dtype != a.dtype):
        return None
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    batch = tuple(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]))
    out = xp.empty(batch + (m, n), dtype=a.dtype)
    if bias is not None:
        out[...] = bias
    elif k == 0:
        out[...] = 0
    if out.size == 0 or k == 0:
        return out
    a, op_a = _as_operand(xp, a, batch)
    b, op_b = _as_operand(xp, b, batch)
    p = plan(op_a, op_b, m, k, n, prod(batch), name, bias=bias is not None, allow_tf32=settings.allow_tf32)
    if max(p.m, p.n, p.k, p.lda, p.ldb, p.ldc, p.batch) > INT_MAX:
        return None
    if xp is np:
        reference_gemm(p, footprint(b), footprint(a), out.reshape(-1))
    else:
        _cublas_gemm(xp, p, a, b, out)
    return out


def product(xp, a, b):
    """``a @ b`` through cuBLAS where ``matmul`` takes it, else the array module's matmul (the
    GEMMs inside the attention and convolution kernels)."""
    out = matmul(xp, a, b)
    return xp.matmul(a, b) if out is None else out
