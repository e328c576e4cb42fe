"""Scaled dot-product attention forward without a scores tensor: one kernel streams the keys
and values through shared memory in tiles and keeps a running softmax (the online softmax of
flash attention), so memory stays linear in the sequence lengths in every dtype.

A block holds ``WARPS`` query rows, one per warp. For each tile of ``TILE`` keys (and their
values, loaded once for the block), lane j of a warp scores key j of the tile against its
warp's query row (float32, or float64 for float64), the warp takes the tile's maximum and
rescales what it has summed so far by exp(old max - new max), adds exp(score - new max) to
the row's denominator, and each lane accumulates its share of the output dims (lane + 32·i)
from the tile's values. At the end the row is divided by its denominator (0 when every key
was masked: PyTorch's safe softmax gives zeros), and lane 0 writes the row's log-sum-exp
m + log(l) (-inf when every key was masked) for the backward (``flash_attention_backward``). Causal masking is top-left (key c is hidden
from query q when c > q, as the fused softmax kernel and PyTorch's ``is_causal``) and a block
stops at the last key its last row sees. Grouped-query attention needs no copy of the keys:
query head h of a batch reads key/value head h // rep, which in the flattened (batch·heads)
index is simply ``bh / rep``.

``reference`` is the kernel in numpy, tile by tile with the same running maximum, rescaling
and butterfly warp reductions (dot products and the value sums in BLAS's order), so the
algorithm is checked against the generic attention on the CPU. ``launch`` returns None for
what the kernel does not take (masks, dropout, head dims above ``MAX_HEAD_DIM``, more shared
memory than a block gets without opting in); the caller runs the two-GEMM path then.
"""

from __future__ import annotations

import numpy as np

from . import _source
from .cache import kernel

WARPS = 8            # query rows per block, one per warp
TILE = 32            # keys per tile: one per lane
MAX_HEAD_DIM = 256   # each lane keeps MAX_HEAD_DIM / 32 output accumulators
THREADS = WARPS * _source.WARP
PARAMS = {"warps": WARPS, "tile": TILE, "per_lane": MAX_HEAD_DIM // _source.WARP, "threads": THREADS}
MAX_SHARED = 48 * 1024  # dynamic shared memory every target grants without an opt-in attribute

# what the forward and backward kernels share: their sizes, and a tile of rows put in shared
# memory one element apart beyond their width, so the rows a warp reads together start in
# different banks
HEADER = r"""
#define WARPS %(warps)d
#define TILE %(tile)d
#define PER_LANE %(per_lane)d
#define FLASH_THREADS %(threads)d

// a block's query rows, one per warp: row row0 + warp of (batch * head) bh, whose keys and values
// are those of head bh / rep (grouped-query attention)
#define QUERY_ROWS \
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31; \
    long long bh = blockIdx.x / row_blocks; \
    long long row0 = (blockIdx.x %% row_blocks) * WARPS; \
    long long row = row0 + warp; \
    bool active = row < lq; \
    const T* kb = k + (bh / rep) * lk * d; \
    const T* vb = v + (bh / rep) * lk * dv; \
    ACC* qw = qs + warp * d;

template <typename E>
__device__ __forceinline__ void load_padded_rows(E* dst, const E* src, int n, int width) {
    for (int i = threadIdx.x; i < n * width; i += FLASH_THREADS)
        dst[(i / width) * (width + 1) + i %% width] = src[i];
}
"""

_KERNEL = r"""
extern "C" __global__ void __launch_bounds__(FLASH_THREADS)
flash_attention(const T* q, const T* k, const T* v, T* out, ACC* lse,
                long long row_blocks, long long rep, long long lq, long long lk, int d, int dv, ACC scale,
                int causal) {
    extern __shared__ __align__(16) unsigned char smem[];
    ACC* qs = (ACC*)smem;                    // WARPS query rows, d each
    T* ks = (T*)(qs + WARPS * d);            // TILE keys, d + 1 apart (no bank conflicts)
    T* vs = ks + TILE * (d + 1);             // TILE values, dv each
    QUERY_ROWS
    for (int c = lane; c < d; c += 32) qw[c] = active ? LOAD(q[(bh * lq + row) * d + c]) : (ACC)0;
    long long last = (row0 + WARPS < lq ? row0 + WARPS : lq) - 1;
    long long end = causal ? (last + 1 < lk ? last + 1 : lk) : lk;
    ACC m = -INFINITY, l = 0;
    ACC acc[PER_LANE];
    for (int i = 0; i < PER_LANE; ++i) acc[i] = 0;
    for (long long start = 0; start < end; start += TILE) {
        int n = (int)(end - start < TILE ? end - start : TILE);
        __syncthreads();  // the previous tile is consumed (and the query rows written)
        load_padded_rows(ks, kb + start * d, n, d);
        for (int i = threadIdx.x; i < n * dv; i += FLASH_THREADS) vs[i] = vb[start * dv + i];
        __syncthreads();
        ACC s = -INFINITY;
        if (lane < n) {
            const T* kr = ks + lane * (d + 1);
            ACC dot = 0;
            for (int c = 0; c < d; ++c) dot += qw[c] * LOAD(kr[c]);
            s = dot * scale;
            if (causal && start + lane > row) s = -INFINITY;
        }
        ACC top = max_nan(m, warp_max(s));
        ACC base = top == -INFINITY ? (ACC)0 : top;  // nothing seen yet: every exp below is 0
        ACC p = EXP(s - base);
        ACC rescale = EXP(m - base);
        l = l * rescale + warp_sum(p);
        for (int i = 0; i < PER_LANE; ++i) acc[i] *= rescale;
        for (int j = 0; j < n; ++j) {
            ACC pj = __shfl_sync(FULL_MASK, p, j);
            const T* vr = vs + j * dv;
            for (int i = 0; i < PER_LANE; ++i) {
                int c = lane + 32 * i;
                if (c < dv) acc[i] += pj * LOAD(vr[c]);
            }
        }
        m = top;
    }
    if (active) {
        ACC inv = l == 0 ? (ACC)0 : (ACC)1 / l;
        for (int i = 0; i < PER_LANE; ++i) {
            int c = lane + 32 * i;
            if (c < dv) out[(bh * lq + row) * dv + c] = STORE(acc[i] * inv);
        }
        // the row's log-sum-exp of the scaled scores, for the backward's recomputation
        if (lane == 0) lse[bh * lq + row] = l == 0 ? (ACC)(-INFINITY) : m + LOG(l);
    }
}
"""


def source(dtype) -> str:
    """CUDA source of ``flash_attention`` for ``dtype``."""
    return header(dtype) + _KERNEL % PARAMS


def header(dtype) -> str:
    """The type header, the block reduction and :data:`HEADER` of a flash kernel for ``dtype``."""
    return _source.type_header(dtype) + _source.BLOCK_REDUCE + HEADER % PARAMS


def element_bytes(dtype) -> int:
    """Bytes of one element of ``dtype`` in a kernel (a half type's 2, else numpy's)."""
    name = _source.dtype_name(dtype)
    return 2 if name in ("float16", "bfloat16") else np.dtype(name).itemsize


def shared_bytes(dtype, d: int, dv: int) -> int:
    """Dynamic shared memory of a block: the query rows (accumulation type), a tile of keys
    (rows padded by one element) and of values (the element type)."""
    acc, item = _source.acc_dtype(dtype).itemsize, element_bytes(dtype)
    return WARPS * d * acc + TILE * (d + 1) * item + TILE * dv * item


def geometry(q_shape: tuple, k_shape: tuple, v_shape: tuple, rep: int, dtype):
    """(batch·heads, lq, lk, d, dv) of a call the kernel takes, or None: q (..., Hq, Lq, D) with
    k (..., Hq / rep, Lk, D) and v (..., Hq / rep, Lk, Dv) of the same leading dims.

    >>> geometry((2, 8, 100, 64), (2, 2, 300, 64), (2, 2, 300, 64), 4, "float16")
    (16, 100, 300, 64, 64)
    >>> geometry((2, 8, 100, 512), (2, 8, 300, 512), (2, 8, 300, 512), 1, "float16") is None  # head dim
    True
    """
    if len(q_shape) < 3 or not len(q_shape) == len(k_shape) == len(v_shape):
        return None
    if q_shape[:-3] != k_shape[:-3] or k_shape[:-1] != v_shape[:-1] or k_shape[-3] * rep != q_shape[-3]:
        return None
    lq, d = q_shape[-2:]
    lk, dv = k_shape[-2], v_shape[-1]
    if k_shape[-1] != d or not (1 <= d <= MAX_HEAD_DIM and 1 <= dv <= MAX_HEAD_DIM) or lk < 1:
        return None
    if shared_bytes(dtype, d, dv) > MAX_SHARED:
        return None
    bh = int(np.prod(q_shape[:-2]))
    blocks = bh * -(-lq // WARPS)
    if not 1 <= blocks <= _source.MAX_GRID_X:
        return None
    return bh, lq, lk, d, dv


def launch(xp, q, k, v, rep: int, scale: float, causal: bool, with_lse: bool = False):
    """softmax(scale·QKᵀ, causal)·V by the kernel (numpy arrays: ``reference``), or None when
    the call is not one it takes; ``with_lse``: (out, each row's log-sum-exp as (bh, lq) in the
    accumulation dtype)."""
    if not _source.supported(q, k, v):
        return None
    found = geometry(q.shape, k.shape, v.shape, rep, q.dtype)
    if found is None:
        return None
    bh, lq, lk, d, dv = found
    acc = _source.acc_dtype(q.dtype).type
    q3 = xp.ascontiguousarray(q.reshape(bh, lq, d))
    k3 = xp.ascontiguousarray(k.reshape(bh // rep, lk, d))
    v3 = xp.ascontiguousarray(v.reshape(bh // rep, lk, dv))
    if xp is np:
        out, lse = reference(q3, k3, v3, rep, acc(scale), causal, with_lse=True)
    else:
        import cupy

        out = xp.empty((bh, lq, dv), dtype=q.dtype)
        lse = xp.empty((bh, lq), dtype=acc)
        raw = kernel("flash_attention", q.dtype, lambda: cupy.RawKernel(source(q.dtype), "flash_attention"))
        row_blocks = -(-lq // WARPS)
        raw((bh * row_blocks,), (THREADS,),
            (q3, k3, v3, out, lse, np.int64(row_blocks), np.int64(rep), np.int64(lq), np.int64(lk), np.int32(d),
             np.int32(dv), acc(scale), np.int32(causal)),
            shared_mem=shared_bytes(q.dtype, d, dv))
    out = out.reshape(q.shape[:-1] + (dv,))
    return (out, lse) if with_lse else out


def reference(q: np.ndarray, k: np.ndarray, v: np.ndarray, rep: int, scale, causal: bool, with_lse: bool = False):
    """``flash_attention`` in numpy on (bh, lq, d), (bh / rep, lk, d), (bh / rep, lk, dv): the
    same tiles of keys, running maximum, rescaling and warp butterflies (a new array; with
    ``with_lse`` also each row's log-sum-exp, (bh, lq) in the accumulation dtype)."""
    acc = _source.acc_dtype(q.dtype)
    bh, lq, _ = q.shape
    lk, dv = v.shape[-2:]
    qa = q.astype(acc)
    ka, va = (np.repeat(x.astype(acc), rep, axis=0) for x in (k, v))  # head bh reads bh // rep
    rows = np.arange(lq)
    m = np.full((bh, lq), -np.inf, acc)
    l = np.zeros((bh, lq), acc)
    out = np.zeros((bh, lq, dv), acc)
    # a block stops at the last key its last row sees; tiles past a row's own last key add
    # exactly nothing to it (its maximum stays, every exp is 0), so one loop serves every block
    end = min(lk, lq) if causal else lk
    for start in range(0, end, TILE):
        n = min(TILE, end - start)
        s = np.full((bh, lq, TILE), -np.inf, acc)
        s[..., :n] = np.matmul(qa, np.swapaxes(ka[:, start:start + n], -1, -2)) * acc.type(scale)
        if causal:
            s[..., :n] = np.where(start + np.arange(n)[None, None, :] > rows[None, :, None], -np.inf, s[..., :n])
        lanes = s.reshape(-1, TILE)
        top = _source.max_nan_reference(m, _source._warp_fold(lanes, _source.max_nan_reference)[:, 0].reshape(bh, lq))
        base = np.where(top == -np.inf, 0, top).astype(acc)
        with np.errstate(invalid="ignore"):
            p = np.exp(s - base[..., None])
            rescale = np.exp(m - base)
        total = _source._warp_fold(p.reshape(-1, TILE), np.add)[:, 0].reshape(bh, lq)
        l = l * rescale + total
        out = out * rescale[..., None] + np.matmul(p[..., :n], va[:, start:start + n])
        m = top
    inv = np.where(l == 0, 0, 1 / np.where(l == 0, 1, l)).astype(acc)
    out = (out * inv[..., None]).astype(q.dtype)
    if not with_lse:
        return out
    with np.errstate(divide="ignore"):
        lse = np.where(l == 0, -np.inf, m + np.log(np.where(l == 0, 1, l))).astype(acc)
    return out, lse
