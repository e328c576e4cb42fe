"""Scaled dot-product attention on the GPU: batched cuBLAS GEMMs around one fused
scale-mask-softmax kernel.

Forward: S = Q·Kᵀ (one batched GEMM), then ``scale_mask_softmax`` turns each row of S into
probabilities in place — scale, causal mask, boolean or additive mask (broadcast through a
per-row offset, no mask of the scores' size is built), and PyTorch's safe softmax (a row
masked entirely gives zeros) — then O = P·V (one batched GEMM). The backward recomputes P the
same way (the op's contract: memory-efficient kernels keep no probabilities) and runs the four
gradient GEMMs. Every GEMM is a cuBLAS call in the inputs' dtype (``blas``: float16 and
bfloat16 accumulate in float32), and the softmax arithmetic is float32.

``scale_mask_softmax_reference`` is the kernel in numpy; handed numpy arrays, the op-level
kernels use it, so their GEMMs, masks and gradients run (and are tested) on the CPU.

Without dropout, in float16 and bfloat16, with no mask or an additive one, cuDNN's fused
attention runs both passes where it is installed (``cudnn_sdpa.py``). Otherwise, without a
mask or dropout the forward is one flash-attention kernel instead
(``flash_attention.py``: tiled keys, online softmax, causal and grouped-query heads), and the
backward its two backward kernels (``flash_attention_backward.py``: P recomputed from each
row's log-sum-exp), and no scores tensor exists. With a mask or dropout the score matrix is
materialized, so memory grows with Lq·Lk as in PyTorch's math backend.
"""

from __future__ import annotations

import numpy as np

from ...heads import heads_ratio, repeat_heads, scale_of
from ...random import keep_mask
from . import _source, blas, cudnn_sdpa, flash_attention, flash_attention_backward
from .cache import kernel

MASK_NONE, MASK_BOOL, MASK_ADD = 0, 1, 2

_SOFTMAX = r"""
extern "C" __global__ void __launch_bounds__(ROW_BLOCK)
scale_mask_softmax(T* s, const MASK_T* mask, const long long* mask_row, long long mask_col,
    long long lq, long long lk, ACC scale, int causal) {
    __shared__ ACC buf[32];
    long long row = blockIdx.x, q = row % lq;
    T* sr = s + row * lk;
    ACC m = -INFINITY;
    for (long long c = threadIdx.x; c < lk; c += blockDim.x) {
        ACC v = LOAD(sr[c]) * scale;
        if (causal && c > q) v = -INFINITY;
#if MASK_KIND == 1
        if (!mask[mask_row[row] + c * mask_col]) v = -INFINITY;
#elif MASK_KIND == 2
        v += (ACC)mask[mask_row[row] + c * mask_col];
#endif
        sr[c] = STORE(v);
        m = max_nan(m, v);
    }
    m = block_max(m, buf);
    if (m == -INFINITY) m = 0;  // a fully masked row: exp(-inf - 0) = 0, and the sum stays 0
    ACC total = 0;
    for (long long c = threadIdx.x; c < lk; c += blockDim.x) total += EXP(LOAD(sr[c]) - m);
    total = block_sum(total, buf);
    ACC inv = total == 0 ? (ACC)0 : (ACC)1 / total;
    for (long long c = threadIdx.x; c < lk; c += blockDim.x) sr[c] = STORE(EXP(LOAD(sr[c]) - m) * inv);
}
"""


def mask_variants(dtype) -> list:
    """The (mask kind, mask dtype) pairs ``_probabilities`` compiles for scores of ``dtype``: no
    mask, a boolean mask, an additive mask in the accumulation dtype (it converts any other)."""
    return [(MASK_NONE, None), (MASK_BOOL, np.dtype(np.bool_)), (MASK_ADD, _source.acc_dtype(dtype))]


def source(dtype, mask_kind: int, mask_dtype=None) -> str:
    """CUDA source of ``scale_mask_softmax`` for scores of ``dtype`` and a mask kind."""
    mask_t = {MASK_NONE: "unsigned char", MASK_BOOL: "bool"}.get(mask_kind)
    if mask_t is None:
        mask_t = {"float16": "__half", "float32": "float", "float64": "double"}[str(np.dtype(mask_dtype))]
    return (_source.type_header(dtype) + f"#define MASK_KIND {mask_kind}\n#define MASK_T {mask_t}\n"
            + _source.BLOCK_REDUCE + _SOFTMAX)


def mask_offsets(xp, mask_shape: tuple, scores_shape: tuple):
    """(per-row offsets, column stride) in elements of a C-contiguous mask broadcast to the
    scores (B..., Lq, Lk): element (row, c) of the broadcast is ``mask[offset[row] + c·stride]``."""
    nd = len(scores_shape)
    shape = (1,) * (nd - len(mask_shape)) + tuple(mask_shape)
    strides, acc = [0] * nd, 1
    for d in range(nd - 1, -1, -1):  # contiguous strides, 0 along broadcast dims
        strides[d] = 0 if shape[d] == 1 and scores_shape[d] != 1 else acc
        acc *= shape[d]
    offsets = xp.zeros(scores_shape[:-1], dtype=np.int64)
    for d, n in enumerate(scores_shape[:-1]):
        if strides[d]:
            offsets += (xp.arange(n, dtype=np.int64) * strides[d]).reshape((n,) + (1,) * (nd - 2 - d))
    return offsets.reshape(-1), strides[-1]


def _probabilities(xp, q, k, mask, is_causal: bool, scale: float):
    """softmax(scale·QKᵀ + mask) by one GEMM and one kernel (None when not float)."""
    if not _source.supported(q, k):
        return None
    s = xp.ascontiguousarray(blas.product(xp, q, xp.swapaxes(k, -1, -2)))
    lq, lk = s.shape[-2:]
    rows = s.size // lk if lk else 0
    if rows == 0:
        return s
    launch = _source.row_launch(rows, lk)
    if launch is None:
        return None
    if mask is None:
        # empty arrays of the parameters' types: the kernel never reads them
        kind, mask_arr, offsets, col = MASK_NONE, xp.empty(0, np.uint8), xp.empty(0, np.int64), 0
        mask_dtype = None
    else:
        kind = MASK_BOOL if mask.dtype == np.bool_ else MASK_ADD
        mask_arr = xp.ascontiguousarray(mask if kind == MASK_BOOL else mask.astype(_source.acc_dtype(s.dtype)))
        offsets, col = mask_offsets(xp, mask_arr.shape, s.shape)
        mask_dtype = mask_arr.dtype
    acc = _source.acc_dtype(s.dtype).type
    if xp is np:
        return scale_mask_softmax_reference(s, None if mask is None else mask_arr, offsets, col, acc(scale),
                                            is_causal)
    import cupy

    raw = kernel("scale_mask_softmax", s.dtype,
                 lambda: cupy.RawKernel(source(s.dtype, kind, mask_dtype), "scale_mask_softmax"),
                 variant=(kind, str(mask_dtype)))
    raw(*launch, (s, mask_arr, offsets, np.int64(col), np.int64(lq), np.int64(lk), acc(scale), np.int32(is_causal)))
    return s


def scale_mask_softmax_reference(s: np.ndarray, mask, offsets, col: int, scale, causal: bool) -> np.ndarray:
    """``scale_mask_softmax`` in numpy, row by row as the kernel's blocks (a new array)."""
    lq, lk = s.shape[-2:]
    acc = _source.acc_dtype(s.dtype)
    v = s.reshape(-1, lk).astype(acc) * scale
    if causal:
        q = np.arange(v.shape[0]) % lq
        v = np.where(np.arange(lk)[None, :] > q[:, None], -np.inf, v)
    if mask is not None:
        m = mask.reshape(-1)[offsets[:, None] + np.arange(lk)[None, :] * col]
        v = np.where(m, v, -np.inf) if mask.dtype == np.bool_ else v + m.astype(acc)
    v = v.astype(s.dtype).astype(acc)  # the kernel stores the masked scores, then rereads them
    top = np.max(v, axis=1, keepdims=True)
    top = np.where(top == -np.inf, 0, top)
    e = np.exp(v - top)
    total = e.sum(axis=1, keepdims=True)
    inv = np.where(total == 0, 0, 1 / np.where(total == 0, 1, total))
    return (e * inv).astype(s.dtype).reshape(s.shape)


# --- op-level kernels ----------------------------------------------------------------------------

def forward(generic):
    """CUDA kernel of ``scaled_dot_product_attention`` (falls back to ``generic``)."""
    def run(xp, q, k, v, attn_mask, *, dropout_p, is_causal, scale, enable_gqa):
        rep = heads_ratio(q, k, enable_gqa)
        if dropout_p == 0:  # no scores tensor at all: cuDNN's fused attention, else our flash kernel
            out = cudnn_sdpa.forward(xp, q, k, v, attn_mask, scale_of(q, scale), is_causal)
            if out is None and attn_mask is None:
                out = flash_attention.launch(xp, q, k, v, rep, scale_of(q, scale), is_causal)
            if out is not None:
                return out
        k_, v_ = repeat_heads(xp, k, rep), repeat_heads(xp, v, rep)
        p = _probabilities(xp, q, k_, attn_mask, is_causal, scale_of(q, scale))
        if p is None:
            return generic(xp, q, k, v, attn_mask, dropout_p=dropout_p, is_causal=is_causal, scale=scale,
                           enable_gqa=enable_gqa)
        if dropout_p > 0:
            keep = keep_mask(xp, p.shape, dropout_p)
            p = p * keep * p.dtype.type(1.0 / (1.0 - dropout_p))
            return blas.product(xp, p, v_), keep
        return blas.product(xp, p, v_)

    return run


def backward(generic):
    """CUDA kernel of ``scaled_dot_product_attention_backward``: P recomputed by the fused
    kernel, then dV = PᵀdO, dP = dO·Vᵀ, dS = P∘(dP − rowsum(dP∘P)), dQ = dS·K·scale, dK = dSᵀQ·scale."""
    def run(xp, g, q, k, v, attn_mask, keep, *, dropout_p, is_causal, scale, enable_gqa, mask_grad):
        rep = heads_ratio(q, k, enable_gqa)
        sc = scale_of(q, scale)
        if keep is None and not mask_grad:  # no scores tensor: cuDNN, else our flash kernels
            grads = cudnn_sdpa.backward(xp, g, q, k, v, attn_mask, sc, is_causal)
            if grads is None and attn_mask is None:
                grads = flash_attention_backward.launch(xp, g, q, k, v, rep, sc, is_causal)
            if grads is not None:
                return grads
        k_, v_ = repeat_heads(xp, k, rep), repeat_heads(xp, v, rep)
        p = _probabilities(xp, q, k_, attn_mask, is_causal, sc)
        if p is None:
            return generic(xp, g, q, k, v, attn_mask, keep, dropout_p=dropout_p, is_causal=is_causal,
                           scale=scale, enable_gqa=enable_gqa, mask_grad=mask_grad)
        keep_scale = p.dtype.type(1.0 / (1.0 - dropout_p)) if keep is not None else None
        dropped = p * keep * keep_scale if keep is not None else p
        dv = blas.product(xp, xp.swapaxes(dropped, -1, -2), g)
        dp = blas.product(xp, g, xp.swapaxes(v_, -1, -2))
        if keep is not None:
            dp = dp * keep * keep_scale
        acc = _source.acc_dtype(p.dtype)
        p32, dp32 = p.astype(acc, copy=False), dp.astype(acc, copy=False)
        ds = (p32 * (dp32 - (dp32 * p32).sum(axis=-1, keepdims=True))).astype(p.dtype, copy=False)
        dq = blas.product(xp, ds, k_) * q.dtype.type(sc)
        dk = blas.product(xp, xp.swapaxes(ds, -1, -2), q) * q.dtype.type(sc)
        if rep > 1:
            dk = dk.reshape(dk.shape[:-3] + (k.shape[-3], rep) + dk.shape[-2:]).sum(axis=-3)
            dv = dv.reshape(dv.shape[:-3] + (v.shape[-3], rep) + dv.shape[-2:]).sum(axis=-3)
        grads = (dq, dk, dv)
        if mask_grad:
            grads += (ds.astype(attn_mask.dtype, copy=False),)
        return grads

    return run
