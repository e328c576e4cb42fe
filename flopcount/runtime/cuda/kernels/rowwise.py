"""Row-wise kernels: softmax, log_softmax, layer norm and RMS norm, one block per row.

A row is ``cols`` elements ``inner`` apart (``row_layout``): softmax over any dim needs no
transpose, and a norm's trailing dims are one contiguous row. Each thread folds every
``blockDim``-th element of the row, then the block reduces (``_source.BLOCK_REDUCE``: warp
shuffles, one shared value per warp), in the accumulation type (float32 for float16 inputs).
Softmax makes three passes over the row (max, sum of exponentials, write); the norms two
statistics passes (mean then centered variance, as the CPU kernels) and a write.

``softmax_reference`` and ``norm_reference`` run the same geometry and reduction order in numpy,
so the algorithm is tested on machines without a GPU: the launchers run them when handed numpy.
"""

from __future__ import annotations

from math import prod

import numpy as np

from . import _source
from .cache import raw_kernel

_SOFTMAX = r"""
extern "C" __global__ void __launch_bounds__(ROW_BLOCK)
softmax_rows(const T* x, T* y, long long cols, long long inner, int log_mode) {
    __shared__ ACC buf[32];
    long long row = blockIdx.x, o = row / inner, i = row % inner;
    const T* xr = x + o * cols * inner + i;
    T* yr = y + o * cols * inner + i;
    ACC m = -INFINITY;
    for (long long c = threadIdx.x; c < cols; c += blockDim.x) m = max_nan(m, LOAD(xr[c * inner]));
    m = block_max(m, buf);
    ACC s = 0;
    for (long long c = threadIdx.x; c < cols; c += blockDim.x) s += EXP(LOAD(xr[c * inner]) - m);
    s = block_sum(s, buf);
    if (log_mode) {
        ACC ls = LOG(s);
        for (long long c = threadIdx.x; c < cols; c += blockDim.x) yr[c * inner] = STORE(LOAD(xr[c * inner]) - m - ls);
    } else {
        for (long long c = threadIdx.x; c < cols; c += blockDim.x) yr[c * inner] = STORE(EXP(LOAD(xr[c * inner]) - m) / s);
    }
}
"""

_NORM = r"""
extern "C" __global__ void __launch_bounds__(ROW_BLOCK)
norm_rows(const T* x, const T* w, const T* b, T* y, long long cols, ACC eps, int centered,
    int has_w, int has_b) {
    __shared__ ACC buf[32];
    const T* xr = x + blockIdx.x * cols;
    T* yr = y + blockIdx.x * cols;
    ACC mean = 0;
    if (centered) {
        ACC s = 0;
        for (long long c = threadIdx.x; c < cols; c += blockDim.x) s += LOAD(xr[c]);
        mean = block_sum(s, buf) / (ACC)cols;
    }
    ACC q = 0;
    for (long long c = threadIdx.x; c < cols; c += blockDim.x) { ACC d = LOAD(xr[c]) - mean; q += d * d; }
    ACC r = (ACC)1 / SQRT(block_sum(q, buf) / (ACC)cols + eps);
    for (long long c = threadIdx.x; c < cols; c += blockDim.x) {
        ACC v = (LOAD(xr[c]) - mean) * r;
        if (has_w) v *= LOAD(w[c]);
        if (has_b) v += LOAD(b[c]);
        yr[c] = STORE(v);
    }
}
"""


_KERNELS = {"softmax_rows": _SOFTMAX, "norm_rows": _NORM}


def source(name: str, dtype) -> str:
    """The CUDA source of kernel ``name`` ('softmax_rows' or 'norm_rows') for ``dtype``."""
    return _source.type_header(dtype) + _source.BLOCK_REDUCE + _KERNELS[name]


def _raw(name: str, dtype):
    return raw_kernel(name, dtype, source)


def row_layout(shape: tuple, dim: int) -> tuple:
    """(outer, cols, inner) of a C-contiguous array reduced along ``dim``: element (o, c, i)
    sits at (o·cols + c)·inner + i, and there are outer·inner rows."""
    return prod(shape[:dim]), shape[dim], prod(shape[dim + 1:])


# --- launchers (CuPy arrays) -------------------------------------------------------------------

def launch_softmax(xp, x, dim: int, log: bool = False):
    """softmax (or log_softmax) of ``x`` along ``dim`` in one kernel launch."""
    if not _source.supported(x) or x.size == 0:
        return None
    if xp is np:
        return softmax_reference(x, dim, log)
    outer, cols, inner = row_layout(x.shape, dim)
    launch = _source.row_launch(outer * inner, cols)
    if launch is None:
        return None
    x = xp.ascontiguousarray(x)
    y = xp.empty_like(x)
    _raw("softmax_rows", x.dtype)(*launch, (x, y, np.int64(cols), np.int64(inner), np.int32(log)))
    return y


def launch_norm(xp, x, weight, bias, normalized_shape: tuple, eps: float, centered: bool):
    """Layer norm (``centered``) or RMS norm over the trailing ``normalized_shape`` dims."""
    if not _source.supported(x, weight, bias) or x.size == 0:
        return None
    if xp is np:
        return norm_reference(x, weight, bias, normalized_shape, eps, centered)
    cols = prod(normalized_shape)
    launch = _source.row_launch(x.size // cols, cols)
    if launch is None:
        return None
    x = xp.ascontiguousarray(x)
    y = xp.empty_like(x)
    w = x if weight is None else xp.ascontiguousarray(weight)  # any pointer when absent
    b = x if bias is None else xp.ascontiguousarray(bias)
    eps = _source.acc_dtype(x.dtype).type(eps)
    _raw("norm_rows", x.dtype)(*launch, (x, w, b, y, np.int64(cols), eps, np.int32(centered),
                                         np.int32(weight is not None), np.int32(bias is not None)))
    return y


# --- op-level kernels (``generic``: the op's array kernel, for dtypes these do not take) ------

def softmax(generic):
    def run(xp, x, *, dim):
        y = launch_softmax(xp, x, dim)
        return generic(xp, x, dim=dim) if y is None else y

    return run


def log_softmax(generic):
    def run(xp, x, *, dim):
        y = launch_softmax(xp, x, dim, log=True)
        return generic(xp, x, dim=dim) if y is None else y

    return run


def layer_norm(generic):
    def run(xp, x, weight, bias, *, normalized_shape, eps):
        y = launch_norm(xp, x, weight, bias, normalized_shape, eps, centered=True)
        return generic(xp, x, weight, bias, normalized_shape=normalized_shape, eps=eps) if y is None else y

    return run


def rms_norm(generic):
    def run(xp, x, weight, *, normalized_shape, eps):
        y = launch_norm(xp, x, weight, None, normalized_shape, eps, centered=False)
        return generic(xp, x, weight, normalized_shape=normalized_shape, eps=eps) if y is None else y

    return run


# --- the same algorithm in numpy -----------------------------------------------------------------

def _rows(x: np.ndarray, dim: int) -> np.ndarray:
    """(outer·inner, cols): the rows the kernel's blocks walk, in block order."""
    outer, cols, inner = row_layout(x.shape, dim)
    return x.reshape(outer, cols, inner).transpose(0, 2, 1).reshape(outer * inner, cols)


def _unrows(r: np.ndarray, shape: tuple, dim: int) -> np.ndarray:
    outer, cols, inner = row_layout(shape, dim)
    return r.reshape(outer, inner, cols).transpose(0, 2, 1).reshape(shape)


def _block_total(rows: np.ndarray, block: int, fold, op, identity) -> np.ndarray:
    partials = _source.thread_partials(rows, block, fold, identity)
    return _source.block_reduce_reference(partials, op, identity)[:, None]


def softmax_reference(x: np.ndarray, dim: int, log: bool = False) -> np.ndarray:
    """``softmax_rows`` in numpy: same rows, block size and reduction order."""
    acc = _source.acc_dtype(x.dtype)
    rows = _rows(x, dim).astype(acc)
    block = _source.block_size(rows.shape[1])
    m = _block_total(rows, block, np.max, _source.max_nan_reference, -np.inf)
    s = _block_total(np.exp(rows - m), block, np.sum, np.add, 0)
    out = rows - m - np.log(s) if log else np.exp(rows - m) / s
    return _unrows(out.astype(x.dtype), x.shape, dim)


def norm_reference(x: np.ndarray, weight, bias, normalized_shape: tuple, eps: float,
                   centered: bool) -> np.ndarray:
    """``norm_rows`` in numpy."""
    acc = _source.acc_dtype(x.dtype)
    cols = prod(normalized_shape)
    rows = x.reshape(-1, cols).astype(acc)
    block = _source.block_size(cols)
    mean = _block_total(rows, block, np.sum, np.add, 0) / acc.type(cols) if centered else acc.type(0)
    d = rows - mean
    r = acc.type(1) / np.sqrt(_block_total(d * d, block, np.sum, np.add, 0) / acc.type(cols) + acc.type(eps))
    v = d * r
    if weight is not None:
        v = v * weight.reshape(-1).astype(acc)
    if bias is not None:
        v = v + bias.reshape(-1).astype(acc)
    return v.astype(x.dtype).reshape(x.shape)
