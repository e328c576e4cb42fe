"""Scaled dot-product attention backward without a scores tensor: the gradients dQ, dK, dV of
O = softmax(scale·QKᵀ, causal)·V recomputed tile by tile from each query row's log-sum-exp
(flash attention's backward), in every float dtype, with causal masking and grouped-query heads.

The op keeps no forward state, so the launcher first runs the forward kernel
(``flash_attention``), which also writes each row's log-sum-exp L, and then, per query row,
delta = rowsum(dO∘O) (the softmax gradient's correction term, (bh, lq) in the accumulation
dtype). With P = exp(scale·q·kᵀ − L) recomputed where needed:
  dS = P∘(dO·Vᵀ − delta),  dQ = scale·dS·K,  dK = scale·dSᵀ·Q,  dV = Pᵀ·dO.
Two kernels, neither with atomics (so the result is deterministic):
  ``flash_attention_dq``: a block holds ``WARPS`` query rows (one per warp) and streams tiles of
  ``TILE`` keys and values through shared memory: lane j scores key j, forms its P and dS, and
  the warp accumulates its row of dQ over the tile's keys (lane + 32·i of the head dims).
  ``flash_attention_dkv``: a block holds ``WARPS`` key rows of one key/value head and streams
  tiles of query rows (with their dO, L and delta) of every query head that reads this key/value
  head (``rep`` of them under grouped-query attention): lane j takes query row j, and the warp
  accumulates its rows of dK and dV. Causal masking is top-left (key c is hidden from query q
  when c > q): the dQ block stops at its last row's last key, and the dK/dV block starts at its
  first key's own query row.

``reference`` is the two kernels in numpy (the same tiles, P recomputed from L, the same sums);
handed numpy arrays, ``launch`` runs it, so the algorithm is checked against the generic
attention gradient on the CPU. ``launch`` returns None for what the kernels do not take (as the
forward: head dims above ``MAX_HEAD_DIM``, more shared memory than a block gets without opting
in); the caller runs the materializing path then.
"""

from __future__ import annotations

import numpy as np

from . import _source, flash_attention as fwd
from .cache import kernel

WARPS, TILE, THREADS = fwd.WARPS, fwd.TILE, fwd.THREADS
_KERNELS = ("flash_attention_dq", "flash_attention_dkv")

_COMMON = r"""
// P and dS of one (query row, key) pair from the query and dO rows (ACC, a stride of 1) and
// the key and value rows (element type, a stride of 1): 0 where causal masking hides the key
__device__ __forceinline__ void p_and_ds(const ACC* qr, const T* kr, const ACC* gr, const T* vr,
                                         int d, int dv, ACC scale, ACC lse, ACC delta, bool hidden,
                                         ACC* p, ACC* ds) {
    ACC dot = 0, dp = 0;
    for (int c = 0; c < d; ++c) dot += qr[c] * LOAD(kr[c]);
    for (int c = 0; c < dv; ++c) dp += gr[c] * LOAD(vr[c]);
    *p = (hidden || lse == -INFINITY) ? (ACC)0 : EXP(dot * scale - lse);
    *ds = *p * (dp - delta);
}
"""

_DQ = r"""
extern "C" __global__ void __launch_bounds__(FLASH_THREADS)
flash_attention_dq(const T* q, const T* k, const T* v, const T* dout, const ACC* lse, const ACC* delta,
                   T* dq, long long row_blocks, long long rep, long long lq, long long lk, int d, int dv,
                   ACC scale, int causal) {
    extern __shared__ __align__(16) unsigned char smem[];
    ACC* qs = (ACC*)smem;                    // WARPS query rows, d each
    ACC* gs = qs + WARPS * d;                // their dO rows, dv each
    T* ks = (T*)(gs + WARPS * dv);           // TILE keys, d + 1 apart (no bank conflicts)
    T* vs = ks + TILE * (d + 1);             // TILE values, dv + 1 apart
    QUERY_ROWS
    ACC* gw = gs + warp * dv;
    for (int c = lane; c < d; c += 32) qw[c] = active ? LOAD(q[(bh * lq + row) * d + c]) : (ACC)0;
    for (int c = lane; c < dv; c += 32) gw[c] = active ? LOAD(dout[(bh * lq + row) * dv + c]) : (ACC)0;
    ACC row_lse = active ? lse[bh * lq + row] : (ACC)(-INFINITY);
    ACC row_delta = active ? delta[bh * lq + row] : (ACC)0;
    long long last = (row0 + WARPS < lq ? row0 + WARPS : lq) - 1;
    long long end = causal ? (last + 1 < lk ? last + 1 : lk) : lk;
    ACC acc[PER_LANE];
    for (int i = 0; i < PER_LANE; ++i) acc[i] = 0;
    for (long long start = 0; start < end; start += TILE) {
        int n = (int)(end - start < TILE ? end - start : TILE);
        __syncthreads();  // the previous tile is consumed (and the rows written)
        load_padded_rows(ks, kb + start * d, n, d);
        load_padded_rows(vs, vb + start * dv, n, dv);
        __syncthreads();
        ACC p = 0, ds = 0;
        if (active && lane < n)
            p_and_ds(qw, ks + lane * (d + 1), gw, vs + lane * (dv + 1), d, dv, scale, row_lse, row_delta,
                     causal && start + lane > row, &p, &ds);
        for (int j = 0; j < n; ++j) {
            ACC dsj = __shfl_sync(FULL_MASK, ds, j);
            const T* kr = ks + j * (d + 1);
            for (int i = 0; i < PER_LANE; ++i) {
                int c = lane + 32 * i;
                if (c < d) acc[i] += dsj * LOAD(kr[c]);
            }
        }
    }
    if (active) {
        for (int i = 0; i < PER_LANE; ++i) {
            int c = lane + 32 * i;
            if (c < d) dq[(bh * lq + row) * d + c] = STORE(acc[i] * scale);
        }
    }
}
"""

_DKV = r"""
extern "C" __global__ void __launch_bounds__(FLASH_THREADS)
flash_attention_dkv(const T* q, const T* k, const T* v, const T* dout, const ACC* lse, const ACC* delta,
                    T* dk, T* dv_out, long long col_blocks, long long rep, long long lq, long long lk, int d,
                    int dv, ACC scale, int causal) {
    extern __shared__ __align__(16) unsigned char smem[];
    ACC* kw_all = (ACC*)smem;                // WARPS key rows, d each
    ACC* vw_all = kw_all + WARPS * d;        // their value rows, dv each
    ACC* ls = vw_all + WARPS * dv;           // TILE query rows' log-sum-exp
    ACC* ds_ = ls + TILE;                    // and delta
    T* qt = (T*)(ds_ + TILE);                // TILE query rows, d + 1 apart
    T* gt = qt + TILE * (d + 1);             // their dO rows, dv + 1 apart
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    long long bkv = blockIdx.x / col_blocks;
    long long col0 = (blockIdx.x %% col_blocks) * WARPS;
    long long col = col0 + warp;
    bool active = col < lk;
    ACC* kw = kw_all + warp * d;
    ACC* vw = vw_all + warp * dv;
    for (int c = lane; c < d; c += 32) kw[c] = active ? LOAD(k[(bkv * lk + col) * d + c]) : (ACC)0;
    for (int c = lane; c < dv; c += 32) vw[c] = active ? LOAD(v[(bkv * lk + col) * dv + c]) : (ACC)0;
    ACC acc_k[PER_LANE], acc_v[PER_LANE];
    for (int i = 0; i < PER_LANE; ++i) acc_k[i] = acc_v[i] = 0;
    // query rows above the block's first key see none of its keys under causal masking
    long long first = causal ? col0 : 0;
    for (long long h = 0; h < rep; ++h) {
        long long bh = bkv * rep + h;
        const T* qb = q + bh * lq * d;
        const T* gb = dout + bh * lq * dv;
        for (long long start = first; start < lq; start += TILE) {
            int n = (int)(lq - start < TILE ? lq - start : TILE);
            __syncthreads();  // the previous tile is consumed (and the rows written)
            load_padded_rows(qt, qb + start * d, n, d);
            load_padded_rows(gt, gb + start * dv, n, dv);
            for (int i = threadIdx.x; i < n; i += FLASH_THREADS) {
                ls[i] = lse[bh * lq + start + i];
                ds_[i] = delta[bh * lq + start + i];
            }
            __syncthreads();
            ACC p = 0, ds = 0;
            if (active && lane < n) {
                // the roles of p_and_ds swapped: this warp's key row against query row j
                const T* qr = qt + lane * (d + 1);
                const T* gr = gt + lane * (dv + 1);
                ACC dot = 0, dp = 0;
                for (int c = 0; c < d; ++c) dot += LOAD(qr[c]) * kw[c];
                for (int c = 0; c < dv; ++c) dp += LOAD(gr[c]) * vw[c];
                bool hidden = causal && col > start + lane;
                p = (hidden || ls[lane] == -INFINITY) ? (ACC)0 : EXP(dot * scale - ls[lane]);
                ds = p * (dp - ds_[lane]);
            }
            for (int j = 0; j < n; ++j) {
                ACC pj = __shfl_sync(FULL_MASK, p, j), dsj = __shfl_sync(FULL_MASK, ds, j);
                const T* qr = qt + j * (d + 1);
                const T* gr = gt + j * (dv + 1);
                for (int i = 0; i < PER_LANE; ++i) {
                    int c = lane + 32 * i;
                    if (c < d) acc_k[i] += dsj * LOAD(qr[c]);
                    if (c < dv) acc_v[i] += pj * LOAD(gr[c]);
                }
            }
        }
    }
    if (active) {
        for (int i = 0; i < PER_LANE; ++i) {
            int c = lane + 32 * i;
            if (c < d) dk[(bkv * lk + col) * d + c] = STORE(acc_k[i] * scale);
            if (c < dv) dv_out[(bkv * lk + col) * dv + c] = STORE(acc_v[i]);
        }
    }
}
"""


def source(name: str, dtype) -> str:
    """CUDA source of ``flash_attention_dq`` or ``flash_attention_dkv`` for ``dtype``."""
    body = {"flash_attention_dq": _DQ, "flash_attention_dkv": _DKV}[name]
    return fwd.header(dtype) + (_COMMON + body) % fwd.PARAMS


def shared_bytes(name: str, dtype, d: int, dv: int) -> int:
    """Dynamic shared memory of a block of kernel ``name``: its own rows in the accumulation
    type, a tile of the other side's rows in the element type (padded by one element), and for
    dK/dV the tile's log-sum-exp and delta.

    >>> shared_bytes("flash_attention_dq", "float16", 64, 64)   # 8·128·4 + 32·130·2
    12416
    """
    acc, item = _source.acc_dtype(dtype).itemsize, fwd.element_bytes(dtype)
    own = WARPS * (d + dv) * acc + TILE * (d + 1 + dv + 1) * item
    return own + (2 * TILE * acc if name == "flash_attention_dkv" else 0)


def geometry(q_shape: tuple, k_shape: tuple, v_shape: tuple, rep: int, dtype):
    """(batch·heads, lq, lk, d, dv) of a call both kernels (and the forward) take, or None.

    >>> geometry((2, 8, 100, 64), (2, 2, 300, 64), (2, 2, 300, 64), 4, "bfloat16")
    (16, 100, 300, 64, 64)
    >>> geometry((1, 2, 5, 256), (1, 2, 5, 256), (1, 2, 5, 256), 1, "float32") is None  # shared memory
    True
    """
    found = fwd.geometry(q_shape, k_shape, v_shape, rep, dtype)
    if found is None:
        return None
    bh, lq, lk, d, dv = found
    if max(shared_bytes(name, dtype, d, dv) for name in _KERNELS) > fwd.MAX_SHARED:
        return None
    if not 1 <= (bh // rep) * -(-lk // WARPS) <= _source.MAX_GRID_X:
        return None
    return found


def launch(xp, g, q, k, v, rep: int, scale: float, causal: bool):
    """(dQ, dK, dV) of softmax(scale·QKᵀ, causal)·V for the output gradient ``g`` by the forward
    kernel and the two backward kernels (numpy arrays: ``reference``), or None when the call is
    not one they take."""
    if not _source.supported(g, q, k, v) or g.shape != q.shape[:-1] + (v.shape[-1],):
        return None
    found = geometry(q.shape, k.shape, v.shape, rep, q.dtype)
    if found is None:
        return None
    bh, lq, lk, d, dv = found
    acc = _source.acc_dtype(q.dtype)
    out, lse = fwd.launch(xp, q, k, v, rep, scale, causal, with_lse=True)
    q3 = xp.ascontiguousarray(q.reshape(bh, lq, d))
    k3 = xp.ascontiguousarray(k.reshape(bh // rep, lk, d))
    v3 = xp.ascontiguousarray(v.reshape(bh // rep, lk, dv))
    g3 = xp.ascontiguousarray(g.reshape(bh, lq, dv))
    delta = (g3.astype(acc) * out.reshape(bh, lq, dv).astype(acc)).sum(axis=-1)
    if xp is np:
        dq, dk, dv_ = reference(q3, k3, v3, g3, lse, delta, rep, acc.type(scale), causal)
    else:
        import cupy

        dq, dk, dv_ = xp.empty_like(q3), xp.empty_like(k3), xp.empty_like(v3)
        geo = (np.int64(rep), np.int64(lq), np.int64(lk), np.int32(d), np.int32(dv), acc.type(scale),
               np.int32(causal))
        for name, blocks, outs in (("flash_attention_dq", -(-lq // WARPS), (dq,)),
                                   ("flash_attention_dkv", -(-lk // WARPS), (dk, dv_))):
            raw = kernel(name, q.dtype, lambda name=name: cupy.RawKernel(source(name, q.dtype), name))
            count = bh if name == "flash_attention_dq" else bh // rep
            raw((count * blocks,), (THREADS,), (q3, k3, v3, g3, lse, delta) + outs + (np.int64(blocks),) + geo,
                shared_mem=shared_bytes(name, q.dtype, d, dv))
    return dq.reshape(q.shape), dk.reshape(k.shape), dv_.reshape(v.shape)


def _p_and_ds(q, k, g, v, lse, delta, scale, hidden):
    """P and dS of query rows (…, rows, d) against key rows (…, keys, d): (…, rows, keys)."""
    acc = lse.dtype
    with np.errstate(invalid="ignore", over="ignore"):
        p = np.exp(np.matmul(q, np.swapaxes(k, -1, -2)) * scale - lse[..., None])
    p = np.where(hidden | (lse[..., None] == -np.inf), 0, p).astype(acc)
    dp = np.matmul(g, np.swapaxes(v, -1, -2))
    return p, (p * (dp - delta[..., None])).astype(acc)


def reference(q, k, v, g, lse, delta, rep: int, scale, causal: bool) -> tuple:
    """The two kernels in numpy on (bh, lq, d) queries, (bh / rep, lk, d) keys, (bh / rep, lk,
    dv) values, the output gradient (bh, lq, dv) and the rows' log-sum-exp and delta (bh, lq):
    dQ by tiles of keys, dK and dV by tiles of query rows over the ``rep`` query heads of each
    key/value head (new arrays of q's dtype)."""
    acc = lse.dtype
    bh, lq, _ = q.shape
    lk = k.shape[1]
    qa, ka, va, ga = (x.astype(acc) for x in (q, k, v, g))
    rows, cols = np.arange(lq), np.arange(lk)
    kr, vr = np.repeat(ka, rep, axis=0), np.repeat(va, rep, axis=0)  # query head bh reads bh // rep
    dq = np.zeros(qa.shape, acc)
    for start in range(0, min(lk, lq) if causal else lk, TILE):  # dQ: a tile of keys at a time
        t = slice(start, min(start + TILE, lk))
        hidden = (cols[t][None, :] > rows[:, None]) if causal else np.zeros((lq, t.stop - start), bool)
        _, ds = _p_and_ds(qa, kr[:, t], ga, vr[:, t], lse, delta, scale, hidden)
        dq += np.matmul(ds, kr[:, t])
    dk, dv = np.zeros(ka.shape, acc), np.zeros(va.shape, acc)
    heads = lambda x: x.reshape((bh // rep, rep) + x.shape[1:])  # noqa: E731  (bh, ...) -> (bkv, rep, ...)
    qh, gh, lh, dh = heads(qa), heads(ga), heads(lse), heads(delta)
    for h in range(rep):  # dK, dV: every query head of a key/value head, a tile of query rows at a time
        for start in range(0, lq, TILE):
            t = slice(start, min(start + TILE, lq))
            hidden = (cols[None, :] > rows[t][:, None]) if causal else np.zeros((t.stop - start, lk), bool)
            p, ds = _p_and_ds(qh[:, h, t], ka, gh[:, h, t], va, lh[:, h, t], dh[:, h, t], scale, hidden)
            dv += np.matmul(np.swapaxes(p, -1, -2), gh[:, h, t])
            dk += np.matmul(np.swapaxes(ds, -1, -2), qh[:, h, t])
    return (dq * acc.type(scale)).astype(q.dtype), (dk * acc.type(scale)).astype(k.dtype), dv.astype(v.dtype)
