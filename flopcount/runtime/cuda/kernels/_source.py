"""CUDA C shared by the raw kernels: the element types, loads and stores through the
accumulation type (float for float16, bfloat16 and float32, double for float64), and block
reductions. bfloat16 is ``ml_dtypes.bfloat16`` on the host (numpy's dtype name "bfloat16") and
``__nv_bfloat16`` in the kernels; dtypes are handled by name, so the sources build without
ml_dtypes installed.

A kernel's source is specialized per dtype with macros (``T``, ``ACC``, ``LOAD``, ``STORE``)
rather than C++ templates, so each compiled kernel has a plain ``extern "C"`` name.

Two launch shapes serve every raw kernel: one block per row (``row_launch``, up to ``MAX_BLOCK``
threads) and a grid-stride loop over elements (``launch_grid_stride``, ``GRID_STRIDE_BLOCK``
threads). Each kernel declares the block it is launched with in ``__launch_bounds__``
(``ROW_BLOCK`` or ``STRIDE_BLOCK``), so the compiler keeps its registers within what such a
block may use; tests check every launch against that bound and ``cuda/limits.py``.
"""

from __future__ import annotations

import numpy as np

from .. import limits

FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")

# dtype name -> (C type, accumulation type, load, store)
_TYPES = {
    "float16": ("__half", "float", "__half2float(v)", "__float2half(v)"),
    "bfloat16": ("__nv_bfloat16", "float", "__bfloat162float(v)", "__float2bfloat16(v)"),
    "float32": ("float", "float", "(v)", "(v)"),
    "float64": ("double", "double", "(v)", "(v)"),
}

# what every target GPU allows (cuda/limits.py): 1024 threads a block, 2^31 - 1 blocks along x
MAX_BLOCK = min(t.max_threads_per_block for t in limits.TARGETS)
MAX_GRID_X = min(t.max_grid_dims[0] for t in limits.TARGETS)
WARP = 32
GRID_STRIDE_BLOCK = 256
GRID_STRIDE_THREADS = 1 << 26


def supported(*arrays) -> bool:
    """True when the arrays (None skipped) share one float dtype the raw kernels handle."""
    dtypes = {str(a.dtype) for a in arrays if a is not None}
    return len(dtypes) == 1 and dtypes.pop() in FLOAT_DTYPES


def acc_dtype(dtype) -> np.dtype:
    """The accumulation dtype of a kernel over ``dtype``: float32 for halves."""
    return np.dtype(np.float64 if dtype_name(dtype) == "float64" else np.float32)


def dtype_name(dtype) -> str:
    """numpy's name of ``dtype`` (a name is returned as it is, so "bfloat16" needs no ml_dtypes)."""
    return dtype if isinstance(dtype, str) else str(np.dtype(dtype))


def type_header(dtype) -> str:
    """Macros that specialize a kernel source to ``dtype``."""
    t, acc, load, store = _TYPES[dtype_name(dtype)]
    math = "" if acc == "double" else "f"
    return (f"#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n#define T {t}\n#define ACC {acc}\n"
            f"#define LOAD(v) ((ACC){load})\n#define STORE(v) ({store})\n"
            f"#define EXP(v) exp{math}(v)\n#define LOG(v) log{math}(v)\n#define SQRT(v) sqrt{math}(v)\n"
            f"#define ROW_BLOCK {MAX_BLOCK}\n#define STRIDE_BLOCK {GRID_STRIDE_BLOCK}\n")


# NVRTC's headers may leave INFINITY undefined.
INFINITY_GUARD = "#ifndef INFINITY\n#define INFINITY __int_as_float(0x7f800000)\n#endif\n"

# Each thread takes elements idx, idx + (all threads), ...: a launch of at most
# GRID_STRIDE_THREADS threads (``launch_grid_stride``) covers any ``total``.
GRID_STRIDE = r"""
#define GRID_STRIDE(idx, total) \
    for (long long idx = blockIdx.x * (long long)blockDim.x + threadIdx.x; idx < total; \
         idx += (long long)gridDim.x * blockDim.x)
"""

# Every warp ends with the block's total, so no broadcast through shared memory is needed.
# ``buf`` holds one value per warp; the leading __syncthreads lets a kernel call the
# reduction twice in a row with the same buffer. block_sum and block_max differ only in the
# warp reduction and the value of an absent warp, so one macro defines both.
BLOCK_REDUCE = INFINITY_GUARD + r"""
#define FULL_MASK 0xffffffffu
__device__ __forceinline__ ACC max_nan(ACC a, ACC b) { return (a > b || a != a) ? a : b; }
__device__ __forceinline__ ACC warp_sum(ACC v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL_MASK, v, o);
    return v;
}
__device__ __forceinline__ ACC warp_max(ACC v) {
    for (int o = 16; o > 0; o >>= 1) v = max_nan(v, __shfl_xor_sync(FULL_MASK, v, o));
    return v;
}
#define DEFINE_BLOCK_REDUCE(name, warp_reduce, identity) \
__device__ ACC name(ACC v, ACC* buf) { \
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5; \
    v = warp_reduce(v); \
    __syncthreads(); \
    if (lane == 0) buf[warp] = v; \
    __syncthreads(); \
    return warp_reduce(lane < warps ? buf[lane] : identity); \
}
DEFINE_BLOCK_REDUCE(block_sum, warp_sum, (ACC)0)
DEFINE_BLOCK_REDUCE(block_max, warp_max, (ACC)(-INFINITY))
"""


def block_size(cols: int) -> int:
    """Threads per block for a row of ``cols`` elements: whole warps, at most 1024."""
    return int(min(MAX_BLOCK, max(WARP, -(-cols // WARP) * WARP)))


def grid_1d(n: int, block: int = GRID_STRIDE_BLOCK) -> tuple:
    """(grid, block) covering ``n`` threads, one element each."""
    return (max(1, -(-n // block)),), (block,)


def grid_stride_launch(total: int) -> tuple:
    """(grid, block) of a kernel looping with ``GRID_STRIDE`` over ``total`` elements: one thread
    per element up to ``GRID_STRIDE_THREADS``, the loop covers the rest."""
    return grid_1d(min(total, GRID_STRIDE_THREADS))


def launch_grid_stride(raw, total: int, args) -> None:
    """Launch ``raw`` over ``total`` elements (``grid_stride_launch``)."""
    grid, block = grid_stride_launch(total)
    raw(grid, block, args)


def row_launch(rows: int, cols: int):
    """(grid, block) of a one-block-per-row kernel, or None when ``rows`` is more blocks than a
    grid holds (the caller then runs its generic kernel).

    >>> row_launch(6, 100)
    ((6,), (128,))
    """
    if not 1 <= rows <= MAX_GRID_X:
        return None
    return (rows,), (block_size(cols),)


# --- the same reductions in numpy, for CPU tests of the algorithm -----------------------------

def thread_partials(values: np.ndarray, block: int, fold, identity) -> np.ndarray:
    """(rows, block) partial results: thread t folds (``fold(array, axis)``: np.sum, np.max)
    elements t, t + block, t + 2·block ... of its row; threads past the row hold ``identity``."""
    rows, cols = values.shape
    pad = -(-cols // block) * block - cols
    padded = np.concatenate([values, np.full((rows, pad), identity, values.dtype)], axis=1)
    return fold(padded.reshape(rows, -1, block), axis=1)


def _warp_fold(v: np.ndarray, op) -> np.ndarray:
    lanes = np.arange(v.shape[1])
    for o in (16, 8, 4, 2, 1):
        v = op(v, v[:, lanes ^ o])
    return v


def block_reduce_reference(partials: np.ndarray, op, identity) -> np.ndarray:
    """What ``block_sum`` / ``block_max`` compute from per-thread ``partials`` (rows, block):
    a butterfly inside each warp, lane 0 of each warp to shared memory, a butterfly over those."""
    rows, block = partials.shape
    warps = block // WARP
    per_warp = _warp_fold(partials.reshape(rows * warps, WARP), op).reshape(rows, warps, WARP)
    buf = np.full((rows, WARP), identity, partials.dtype)
    buf[:, :warps] = per_warp[:, :, 0]
    return _warp_fold(buf, op)[:, 0]


def max_nan_reference(a, b):
    """``max_nan`` above: a NaN wins, as numpy's max."""
    return np.where((a > b) | (a != a), a, b)

