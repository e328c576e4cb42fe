"""Scaled dot-product attention (one op, forward and backward) and multi-head attention.

Cost (COUNTING.md), with scores of shape (B..., H, Lq, Lk) and n = numel(scores):
* forward: MACs B·H·Lq·Lk·(D + Dv) for the QKᵀ and PV contractions. With ``is_causal`` the
  count is the same (the kernel computes the full score matrix and masks it); counting only the
  unmasked half, as for kernels that skip it, is a counting policy of the convention
  (``FlopcountConvention(causal="half")``), which reads ``score_contractions``. FLOPs = 2·MACs
  + n (scale) + 5·n (softmax) + n when a mask or causal masking is applied + 2·n for dropout
  (compare with p, multiply by the scaled mask).
* backward: MACs 2x the forward, for the dV, dP, dQ and dK contractions, as PyTorch's
  FlopCounterMode counts them. The kernel also recomputes the scores and the softmax from q
  and k instead of storing the probabilities; that recomputation (another B·H·Lq·Lk·D MACs)
  is not in the count, so forward : backward stays 1 : 2 as for any GEMM. FLOPs = 2·MACs
  + 4·n (softmax gradient: multiply, row sum, subtract, multiply) + n (scale) + n for dropout.

Multi-head attention (``multi_head_attention_forward``) is a composite: linear projections,
this op (or explicit matmuls and softmax when the attention weights are asked for) and the
output projection.
"""

from __future__ import annotations

__all__ = ["scaled_dot_product_attention", "multi_head_attention_forward"]  # the functional API (nn.functional re-exports it)

import math
from math import prod

from .. import dtypes as _dt
from ..cuda import kernels as cuda_kernels
from ..dispatch import apply
from ..errors import ShapeError
from ..heads import heads_ratio, repeat_heads, scale_of
from ..random import keep_mask
from ..registry import Op, Spec, io_cost, register_op
from ..sbp import B, P, S, Signature
from ._helpers import as_tensor, broadcast_shapes, upcast_half
from .linalg import blas_operand

# --- shapes --------------------------------------------------------------------------------------

def _attention_shapes(op: str, q, k, v, attn_mask, enable_gqa: bool) -> tuple:
    """(batch dims of the scores, incl. heads; the scores' shape); errors name op and shapes."""
    shapes = f"query {q.shape}, key {k.shape}, value {v.shape}"
    if q.ndim < 2 or k.ndim < 2 or v.ndim < 2:
        raise ShapeError(f"{op}: query, key and value need at least 2 dims, got {shapes}")
    if not (q.dtype is k.dtype is v.dtype) or not q.dtype.is_floating_point:
        raise ShapeError(f"{op}: query, key and value need one floating dtype, got "
                         f"{q.dtype.name}, {k.dtype.name}, {v.dtype.name}")
    if q.shape[-1] != k.shape[-1]:
        raise ShapeError(f"{op}: query and key need the same embedding size (last dim), got {shapes}")
    if k.shape[:-1] != v.shape[:-1]:
        raise ShapeError(f"{op}: key and value need the same batch dims and sequence length, got {shapes}")
    kv_batch = tuple(k.shape[:-2])
    if enable_gqa and q.ndim >= 3 and k.ndim >= 3 and q.shape[-3] != k.shape[-3]:
        if q.shape[-3] % k.shape[-3]:
            raise ShapeError(f"{op}: with enable_gqa the query heads ({q.shape[-3]}) must be a multiple "
                             f"of the key/value heads ({k.shape[-3]}), got {shapes}")
        kv_batch = kv_batch[:-1] + (q.shape[-3],)
    batch = broadcast_shapes(op, tuple(q.shape[:-2]), kv_batch)
    scores = batch + (q.shape[-2], k.shape[-2])
    if attn_mask is not None:
        if attn_mask.dtype is not _dt.bool_ and not attn_mask.dtype.is_floating_point:
            raise ShapeError(f"{op}: attn_mask must be bool or floating, got {attn_mask.dtype.name}")
        if broadcast_shapes(op, tuple(attn_mask.shape), scores) != scores:
            raise ShapeError(f"{op}: attn_mask {attn_mask.shape} does not broadcast to the "
                             f"attention scores {scores}")
    return batch, scores


def _check_attrs(op: str, attn_mask, dropout_p: float, is_causal: bool) -> None:
    if is_causal and attn_mask is not None:
        raise ShapeError(f"{op}: an explicit attn_mask should not be set when is_causal=True")
    if not 0.0 <= dropout_p < 1.0:
        raise ShapeError(f"{op}: dropout_p must be in [0, 1), got {dropout_p}")


# --- kernels -------------------------------------------------------------------------------------

def _probabilities(xp, q, k, attn_mask, is_causal, scale):
    """softmax(scale·qkᵀ + mask) over the last dim; rows masked entirely give zeros (PyTorch's
    safe softmax), not NaN. Every step after the matmul writes into the score array: one
    (…, Lq, Lk) buffer instead of six."""
    s = xp.matmul(blas_operand(xp, q), blas_operand(xp, xp.swapaxes(k, -1, -2)))
    s *= scale
    if is_causal:
        s[..., ~xp.tril(xp.ones(s.shape[-2:], dtype=bool))] = -xp.inf
    if attn_mask is not None:
        if attn_mask.dtype == bool:
            s = xp.where(attn_mask, s, -xp.inf)  # the mask may broadcast s to more dims
        else:
            s = s + attn_mask
    row_max = s.max(axis=-1, keepdims=True)
    row_max[row_max == -xp.inf] = 0
    s -= row_max
    xp.exp(s, out=s)
    total = s.sum(axis=-1, keepdims=True)
    total[total == 0] = 1
    s /= total
    return s


@register_op("scaled_dot_product_attention", ptflops="attention")
class ScaledDotProductAttention(Op):
    """softmax(q kᵀ·scale + mask) v over (B..., H, L, D) inputs. With ``dropout_p > 0`` it
    returns (out, keep_mask) so the backward pass uses the same mask."""

    random = True  # draws a dropout mask when dropout_p > 0
    score_contractions = 1  # its MACs sweep the (Lq, Lk) scores once per contraction pair (QKᵀ, PV)

    def shape(q, k, v, attn_mask, *, dropout_p, is_causal, scale, enable_gqa):
        op = "scaled_dot_product_attention"
        _check_attrs(op, attn_mask, dropout_p, is_causal)
        batch, scores = _attention_shapes(op, q, k, v, attn_mask, enable_gqa)
        out = Spec(batch + (q.shape[-2], v.shape[-1]), q.dtype, q.device)
        if dropout_p > 0:
            return out, Spec(scores, _dt.bool_, q.device)
        return out

    def forward(xp, q, k, v, attn_mask, *, dropout_p, is_causal, scale, enable_gqa):
        rep = heads_ratio(q, k, enable_gqa)
        k_, v_ = repeat_heads(xp, upcast_half(k), rep), repeat_heads(xp, upcast_half(v), rep)
        p = _probabilities(xp, upcast_half(q), k_, upcast_half(attn_mask), is_causal, scale_of(q, scale))
        if dropout_p > 0:
            keep = keep_mask(xp, p.shape, dropout_p)
            out = xp.matmul(p * keep * (1.0 / (1.0 - dropout_p)), v_)
            return out.astype(q.dtype, copy=False), keep
        return xp.matmul(p, blas_operand(xp, v_)).astype(q.dtype, copy=False)

    kernels = {"cuda": cuda_kernels.sdpa(forward)}

    def vjp(g, out, q, k, v, attn_mask, *, dropout_p, is_causal, scale, enable_gqa):
        keep = None
        if dropout_p > 0:
            g, _ = g  # the mask is boolean: no gradient
            keep = out[1]
        mask_grad = attn_mask is not None and attn_mask.requires_grad
        grads = apply(ScaledDotProductAttentionBackward, g, q, k, v, attn_mask, keep, dropout_p=dropout_p,
                      is_causal=is_causal, scale=scale, enable_gqa=enable_gqa, mask_grad=mask_grad)
        return grads[0], grads[1], grads[2], (grads[3] if mask_grad else None)

    def cost(out, q, k, v, attn_mask, *, dropout_p, is_causal, scale, enable_gqa):
        macs, n = _attention_macs(q, k, v, attn_mask, enable_gqa)
        # scale, softmax (5), mask or causal masking, dropout (compare, multiply)
        flops = 2 * macs + n + 5 * n + (n if attn_mask is not None or is_causal else 0) + (2 * n if dropout_p > 0 else 0)
        return io_cost(out, (q, k, v, attn_mask), macs=macs, flops=flops)

    def sbp(out, q, k, v, attn_mask, *, dropout_p, is_causal, scale, enable_gqa):
        n_out = 2 if dropout_p > 0 else 1
        return _attention_sbp((q, k, v, attn_mask), q, k, v, attn_mask, is_causal,
                              lambda d, per: (S(d),) * n_out)


def _attention_sbp(inputs, q, k, v, attn_mask, is_causal, outs, rows=True) -> list:
    """Signatures of attention: any batch dim, the heads (dim -3) above all (Megatron splits
    attention by heads), every operand that has the dim split along it and a mask broadcast
    there left whole. With ``rows``, also the queries (dim -2 of q) against whole keys and
    values; not when the mask is causal, which each rank would draw from its own row 0."""
    nd = max(t.ndim for t in (q, k, v))
    sigs = []
    for d in range(nd - 2):
        per = []
        for t in inputs:
            if t is None:
                per.append(None)
                continue
            i = d - (nd - t.ndim)
            per.append(S(i) if i >= 0 and t.shape[i] > 1 else B)
        if q.shape[d - (nd - q.ndim)] > 1:
            sigs.append(Signature(tuple(per), outs(d, per)))
    if rows and not is_causal and q.shape[-2] > 1:
        carried = attn_mask is not None and attn_mask.ndim >= 2 and attn_mask.shape[-2] > 1
        per = (S(q.ndim - 2), B, B, None if attn_mask is None else (S(attn_mask.ndim - 2) if carried else B))
        sigs.append(Signature(per, outs(nd - 2, per)))
    sigs.sort(key=lambda sig: next(s.dim for s in sig.outputs) != nd - 3)  # heads first
    return sigs


def _attention_macs(q, k, v, attn_mask, enable_gqa) -> tuple:
    """(forward MACs, numel of the scores) of one attention call."""
    _, scores = _attention_shapes("scaled_dot_product_attention", q, k, v, attn_mask, enable_gqa)
    n = prod(scores)
    return n * (q.shape[-1] + v.shape[-1]), n  # QKᵀ: n·D, PV: n·Dv


@register_op("scaled_dot_product_attention_backward")
class ScaledDotProductAttentionBackward(Op):
    """(dq, dk, dv[, d_mask]) of attention, given the output gradient ``g``. Recomputes the
    probabilities from q and k (as memory-efficient kernels do) and reuses the dropout mask."""
    backward = True  # dispatched by a vjp

    vjp = None  # no double backward through fused attention (as PyTorch's fused kernels)
    score_contractions = 2  # dP and dV, then dQ and dK: twice the forward's sweeps of the scores

    def shape(g, q, k, v, attn_mask, keep, *, dropout_p, is_causal, scale, enable_gqa, mask_grad):
        op = "scaled_dot_product_attention_backward"
        batch, scores = _attention_shapes(op, q, k, v, attn_mask, enable_gqa)
        if tuple(g.shape) != batch + (q.shape[-2], v.shape[-1]):
            raise ShapeError(f"{op}: gradient {g.shape} does not fit the output {batch + (q.shape[-2], v.shape[-1])}")
        kv_batch = batch[:-1] + (k.shape[-3],) if heads_ratio(q, k, enable_gqa) > 1 else batch
        specs = (Spec(batch + tuple(q.shape[-2:]), q.dtype, q.device),
                 Spec(kv_batch + tuple(k.shape[-2:]), k.dtype, k.device),
                 Spec(kv_batch + tuple(v.shape[-2:]), v.dtype, v.device))
        if mask_grad:
            specs += (Spec(scores, attn_mask.dtype, q.device),)
        return specs

    def forward(xp, g, q, k, v, attn_mask, keep, *, dropout_p, is_causal, scale, enable_gqa, mask_grad):
        rep = heads_ratio(q, k, enable_gqa)
        g_, q_ = upcast_half(g), upcast_half(q)
        k_, v_ = repeat_heads(xp, upcast_half(k), rep), repeat_heads(xp, upcast_half(v), rep)
        sc = scale_of(q, scale)
        p = _probabilities(xp, q_, k_, upcast_half(attn_mask), is_causal, sc)
        dropped = p * keep * (1.0 / (1.0 - dropout_p)) if keep is not None else p
        g_, q_, k_, v_ = (blas_operand(xp, t) for t in (g_, q_, k_, v_))
        dv = xp.matmul(xp.swapaxes(dropped, -1, -2), g_)
        dp = xp.matmul(g_, xp.swapaxes(v_, -1, -2))
        if keep is not None:
            dp = dp * keep * (1.0 / (1.0 - dropout_p))
        ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True))  # softmax gradient
        dq = xp.matmul(ds, k_)
        dq *= sc
        dk = xp.matmul(xp.swapaxes(ds, -1, -2), q_)
        dk *= sc
        if rep > 1:  # each key/value head sums the gradients of the query heads it served
            dk = dk.reshape(dk.shape[:-3] + (k.shape[-3], rep) + dk.shape[-2:]).sum(axis=-3)
            dv = dv.reshape(dv.shape[:-3] + (v.shape[-3], rep) + dv.shape[-2:]).sum(axis=-3)
        grads = (dq.astype(q.dtype, copy=False), dk.astype(k.dtype, copy=False), dv.astype(v.dtype, copy=False))
        if mask_grad:
            grads += (ds.astype(attn_mask.dtype, copy=False),)  # the mask is added to the scores
        return grads

    kernels = {"cuda": cuda_kernels.sdpa_backward(forward)}

    def cost(out, g, q, k, v, attn_mask, keep, *, dropout_p, is_causal, scale, enable_gqa, mask_grad):
        fwd_macs, n = _attention_macs(q, k, v, attn_mask, enable_gqa)
        macs = 2 * fwd_macs  # dV, dP, dQ, dK (the scores' recomputation is not counted)
        # softmax gradient (4), scale of dS, dropout mask multiply
        flops = 2 * macs + 4 * n + n + (n if keep is not None else 0)
        return io_cost(out, (g, q, k, v, attn_mask, keep), macs=macs, flops=flops)

    def sbp(out, g, q, k, v, attn_mask, keep, *, dropout_p, is_causal, scale, enable_gqa, mask_grad):
        # a key, value or mask broadcast along a split dim serves every rank: its gradient is the
        # sum of the ranks' parts
        def outs(d, per):
            grads = (per[1],) + tuple(p if p is not B else P for p in per[2:4 if not mask_grad else 5])
            return grads

        return _attention_sbp((g, q, k, v, attn_mask, keep), q, k, v, attn_mask, is_causal, outs, rows=False)


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p: float = 0.0,
                                 is_causal: bool = False, scale: float | None = None,
                                 enable_gqa: bool = False):
    """softmax(q kᵀ·scale + mask) v for q (B..., H, Lq, D), k (B..., Hk, Lk, D), v (B..., Hk, Lk, Dv).

    A bool ``attn_mask`` marks the positions that take part (True); a float one is added to the
    scores; both broadcast. ``is_causal`` masks keys after each query (top-left aligned).
    ``enable_gqa`` lets k and v have fewer heads than q.

    >>> q = rt.randn(1, 2, 4, 8)
    >>> scaled_dot_product_attention(q, q, q, is_causal=True).shape
    (1, 2, 4, 8)
    """
    out = apply(ScaledDotProductAttention, query, key, value, attn_mask, dropout_p=float(dropout_p),
                is_causal=bool(is_causal), scale=None if scale is None else float(scale),
                enable_gqa=bool(enable_gqa))
    return out[0] if dropout_p > 0 else out


# --- multi-head attention ------------------------------------------------------------------------

def _float_mask(mask, like, name: str):
    """PyTorch's canonical mask: bool (True = masked out) becomes −inf/0 in ``like``'s dtype."""
    if mask is None:
        return None
    from .elementwise import cast, where

    if mask.dtype is _dt.bool_:
        return where(mask, as_tensor(-math.inf, like), as_tensor(0.0, like))
    if not mask.dtype.is_floating_point:
        raise ShapeError(f"multi_head_attention_forward: {name} must be bool or floating, got {mask.dtype.name}")
    return cast(mask, like.dtype)


def _in_projection(query, key, value, embed_dim, in_proj_weight, in_proj_bias, separate):
    """q, k, v projections. Self-attention uses one packed linear, as PyTorch does."""
    from .linalg import linear
    from .movement import chunk, split

    if separate is None and key is value and query is key:
        return chunk(linear(query, in_proj_weight, in_proj_bias), 3, -1)
    biases = (None,) * 3 if in_proj_bias is None else split(in_proj_bias, embed_dim)
    if separate is not None:
        return tuple(linear(x, w, b) for x, w, b in zip((query, key, value), separate, biases))
    weights = split(in_proj_weight, embed_dim)
    if key is value:  # encoder-decoder attention: one packed linear for k and v
        kv_weight = split(in_proj_weight, [embed_dim, 2 * embed_dim])[1]
        kv_bias = None if in_proj_bias is None else split(in_proj_bias, [embed_dim, 2 * embed_dim])[1]
        k, v = chunk(linear(key, kv_weight, kv_bias), 2, -1)
        return linear(query, weights[0], biases[0]), k, v
    return tuple(linear(x, w, b) for x, w, b in zip((query, key, value), weights, biases))


def multi_head_attention_forward(query, key, value, embed_dim_to_check: int, num_heads: int,
                                 in_proj_weight, in_proj_bias, bias_k, bias_v, add_zero_attn: bool,
                                 dropout_p: float, out_proj_weight, out_proj_bias, training: bool = True,
                                 key_padding_mask=None, need_weights: bool = True, attn_mask=None,
                                 use_separate_proj_weight: bool = False, q_proj_weight=None,
                                 k_proj_weight=None, v_proj_weight=None, static_k=None, static_v=None,
                                 average_attn_weights: bool = True, is_causal: bool = False):
    """PyTorch's multi-head attention on (L, N, E) inputs (or unbatched (L, E)).

    Returns (output, weights): weights (N, L, S) averaged over heads, (N, H, L, S) without
    averaging, or None when ``need_weights`` is False; then the fused
    ``scaled_dot_product_attention`` op runs, otherwise explicit matmuls and a softmax.
    ``bias_k``/``bias_v``, ``add_zero_attn`` and ``static_k``/``static_v`` are not supported.
    """
    from .activations import softmax
    from .dropout import dropout
    from .elementwise import add, mul
    from .linalg import linear, matmul
    from .movement import expand, permute, reshape, squeeze, transpose, unsqueeze
    from .reduction import mean

    op = "multi_head_attention_forward"
    if bias_k is not None or bias_v is not None or add_zero_attn or static_k is not None or static_v is not None:
        raise NotImplementedError(f"{op}: bias_k/bias_v, add_zero_attn and static_k/static_v are not supported")
    batched = query.ndim == 3
    if query.ndim not in (2, 3) or key.ndim != query.ndim or value.ndim != query.ndim:
        raise ShapeError(f"{op}: query, key and value must all be 3-d (L, N, E) or 2-d (L, E), got "
                         f"{query.shape}, {key.shape}, {value.shape}")
    if not batched:
        same_kv, same_qk = key is value, query is key
        query = unsqueeze(query, 1)
        key = query if same_qk else unsqueeze(key, 1)
        value = key if same_kv else unsqueeze(value, 1)
        if key_padding_mask is not None:
            key_padding_mask = unsqueeze(key_padding_mask, 0)
    tgt_len, bsz, embed_dim = query.shape
    src_len = key.shape[0]
    if embed_dim != embed_dim_to_check:
        raise ShapeError(f"{op}: expected an embedding of size {embed_dim_to_check}, got query {query.shape}")
    if embed_dim % num_heads:
        raise ShapeError(f"{op}: embed_dim {embed_dim} is not divisible by num_heads {num_heads}")
    if key.shape[:2] != value.shape[:2]:
        raise ShapeError(f"{op}: key {key.shape} and value {value.shape} need the same (S, N)")
    head_dim = embed_dim // num_heads

    if key_padding_mask is not None and tuple(key_padding_mask.shape) != (bsz, src_len):
        raise ShapeError(f"{op}: key_padding_mask {key_padding_mask.shape} should be {(bsz, src_len)}")
    key_padding_mask = _float_mask(key_padding_mask, query, "key_padding_mask")
    if is_causal and attn_mask is None:
        raise ShapeError(f"{op}: is_causal is a hint that attn_mask is the causal mask; attn_mask is needed")
    if is_causal and key_padding_mask is None and not need_weights:
        attn_mask = None  # the fused op applies the causal mask itself
    else:
        attn_mask = _float_mask(attn_mask, query, "attn_mask")
        if key_padding_mask is not None:
            is_causal = False  # the merged mask is no longer just causal

    separate = (q_proj_weight, k_proj_weight, v_proj_weight) if use_separate_proj_weight else None
    q, k, v = _in_projection(query, key, value, embed_dim, in_proj_weight, in_proj_bias, separate)

    if attn_mask is not None:
        if attn_mask.ndim == 2:
            if tuple(attn_mask.shape) != (tgt_len, src_len):
                raise ShapeError(f"{op}: the 2-d attn_mask is {attn_mask.shape}, expected {(tgt_len, src_len)}")
            attn_mask = unsqueeze(attn_mask, 0)
        elif attn_mask.ndim == 3:
            if tuple(attn_mask.shape) != (bsz * num_heads, tgt_len, src_len):
                raise ShapeError(f"{op}: the 3-d attn_mask is {attn_mask.shape}, expected "
                                 f"{(bsz * num_heads, tgt_len, src_len)}")
        else:
            raise ShapeError(f"{op}: attn_mask must be 2-d or 3-d, got {attn_mask.shape}")

    # (L, N, E) -> (N·H, L, hd)
    q = transpose(reshape(q, (tgt_len, bsz * num_heads, head_dim)), 0, 1)
    k = transpose(reshape(k, (src_len, bsz * num_heads, head_dim)), 0, 1)
    v = transpose(reshape(v, (src_len, bsz * num_heads, head_dim)), 0, 1)

    if key_padding_mask is not None:
        kpm = reshape(expand(reshape(key_padding_mask, (bsz, 1, 1, src_len)), (bsz, num_heads, 1, src_len)),
                      (bsz * num_heads, 1, src_len))
        attn_mask = kpm if attn_mask is None else add(attn_mask, kpm)
    if not training:
        dropout_p = 0.0

    if need_weights:
        scores = matmul(mul(q, math.sqrt(1.0 / head_dim)), transpose(k, -2, -1))
        if attn_mask is not None:
            scores = add(scores, attn_mask)
        weights = softmax(scores, -1)
        if dropout_p > 0:
            weights = dropout(weights, dropout_p)
        out = matmul(weights, v)  # (N·H, L, hd)
        out = reshape(transpose(out, 0, 1), (tgt_len * bsz, embed_dim))
        out = reshape(linear(out, out_proj_weight, out_proj_bias), (tgt_len, bsz, embed_dim))
        weights = reshape(weights, (bsz, num_heads, tgt_len, src_len))
        if average_attn_weights:
            weights = mean(weights, 1)
        if not batched:
            out, weights = squeeze(out, 1), squeeze(weights, 0)
        return out, weights

    if attn_mask is not None:
        attn_mask = unsqueeze(attn_mask, 0) if attn_mask.shape[0] == 1 else \
            reshape(attn_mask, (bsz, num_heads, -1, src_len))
    q = reshape(q, (bsz, num_heads, tgt_len, head_dim))
    k = reshape(k, (bsz, num_heads, src_len, head_dim))
    v = reshape(v, (bsz, num_heads, src_len, head_dim))
    out = scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal)
    out = reshape(permute(out, (2, 0, 1, 3)), (bsz * tgt_len, embed_dim))
    out = reshape(linear(out, out_proj_weight, out_proj_bias), (tgt_len, bsz, embed_dim))
    if not batched:
        out = squeeze(out, 1)
    return out, None
