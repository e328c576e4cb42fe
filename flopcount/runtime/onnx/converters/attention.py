"""The opset-23 attention ops: Attention (with opset 25's sliding window) and RotaryEmbedding.

Attention is the runtime's ``scaled_dot_product_attention`` (one op: its two contractions are
counted as attention MACs) around the ONNX-only parts written as ops in front of it: 3-d inputs
split into heads, the KV cache appended, ONNX's bottom-right causal mask and the padding of
``nonpad_kv_seqlen``. When the node asks for what the fused op does not give (softcapping, the
``qk_matmul_output``, a softmax in another precision), the attention is spelled out instead:
MatMul, the cap, the bias, Softmax, MatMul.
"""

from __future__ import annotations

import math
import operator

import numpy as np

from ... import dtypes as _dt
from ...ops import activations as act
from ...ops import elementwise as ew
from ...ops import linalg, movement, reduction
from ...ops.attention import scaled_dot_product_attention
from ...ops.indexing import getitem
from ..elem_types import to_dtype
from ._base import constant, converter


def _heads(x, heads: int):
    """(B, L, H·D) -> (B, H, L, D)."""
    b, length, hidden = x.shape
    return movement.permute(movement.reshape(x, (b, length, heads, hidden // heads)), (0, 2, 1, 3))


def _merge_heads(y):
    """(B, H, L, D) -> (B, L, H·D)."""
    b, h, length, d = y.shape
    return movement.reshape(movement.contiguous(movement.permute(y, (0, 2, 1, 3))), (b, length, h * d))


def _allowed_mask(ctx, q, k, mask, past: int, nonpad):
    """The keys each query may attend as one mask for the scores (B, H, Lq, Lk): a bool mask
    (True: attend), an additive float mask, or None. Combines the node's ``attn_mask`` (padded
    to the total key length), the causal rule (query i attends key j when j <= i + offset), the
    sliding window of opset 25 (i + offset - left <= j <= i + offset + right) and the padding
    ``nonpad_kv_seqlen`` describes."""
    lq, lk = q.shape[2], k.shape[2]
    if mask is not None and mask.shape[-1] < lk:  # a mask for the past keys only: pad it
        fill = False if mask.dtype is _dt.bool_ else -math.inf
        mask = movement.pad(mask, [0, lk - mask.shape[-1]], value=fill)
    allowed = _position_rule(ctx, lq, lk, past, nonpad)  # bool conditions, combined with logical_and
    if nonpad is not None:
        keep = ew.lt(constant(np.arange(lk)), movement.reshape(ew.cast(nonpad, _dt.int64), (-1, 1, 1, 1)))
        allowed = keep if allowed is None else ew.logical_and(allowed, keep)
    if allowed is None:
        return mask
    if mask is None:
        return allowed
    if mask.dtype is _dt.bool_:
        return ew.logical_and(mask, allowed)
    return ew.where(allowed, mask, constant(np.array(-math.inf, mask.dtype.np)))


def _position_rule(ctx, lq: int, lk: int, past: int, nonpad):
    """Which keys each query may attend by position alone (causal, window), or None. Query i sits
    at i + offset among the keys: offset is the past length, or per batch nonpad[b] - Lq for a
    static cache. Each rule compares a constant with that offset; a constant offset folds them."""
    ahead = np.arange(lk).reshape(1, lk) - np.arange(lq).reshape(lq, 1)  # key j's lead over query i
    left, right = int(ctx.attr("left_window_size", -1)), int(ctx.attr("right_window_size", -1))
    rules = []  # (bound, compare): the key is allowed where compare(bound, offset)
    if ctx.attr("is_causal", 0):
        rules.append((ahead, operator.le))
    if left >= 0:
        rules.append((ahead + left, operator.ge))
    if right >= 0:
        rules.append((ahead - right, operator.le))
    if not rules:
        return None
    static = nonpad is not None and past == 0
    offset = movement.reshape(ew.sub(ew.cast(nonpad, _dt.int64), lq), (-1, 1, 1, 1)) if static else past
    allowed = None
    for bound, compare in rules:  # numpy arrays for a constant offset, the runtime's ops for a static cache
        rule = compare(constant(bound), offset) if static else compare(bound, offset)
        allowed = rule if allowed is None else allowed & rule
    return allowed if static else constant(allowed)


def _as_bias(mask, like):
    """An additive bias of ``like``'s dtype for a bool or float mask."""
    if mask.dtype is _dt.bool_:
        return ew.where(mask, constant(np.array(0, like.dtype.np)), constant(np.array(-math.inf, like.dtype.np)))
    return ew.cast(mask, like.dtype)


def _repeat_kv(t, rep: int):
    """Grouped-query attention: key/value head j serves query heads j·rep ... j·rep + rep − 1."""
    if rep == 1:
        return t
    b, h, length, d = t.shape
    wide = movement.expand(movement.unsqueeze(t, 2), (b, h, rep, length, d))
    return movement.reshape(wide, (b, h * rep, length, d))


def _spelled_out(ctx, q, k, v, mask, scale: float):
    """softmax(cap(q kᵀ·scale) + bias) v op by op: (Y, qk_matmul_output)."""
    rep = q.shape[1] // k.shape[1]
    k, v = _repeat_kv(k, rep), _repeat_kv(v, rep)
    scores = ew.mul(linalg.matmul(q, movement.transpose(k, -1, -2)), scale)
    softcap = float(ctx.attr("softcap", 0.0) or 0.0)
    if softcap > 0:
        scores = ew.mul(ew.tanh(ew.div(scores, softcap)), softcap)
    mode = int(ctx.attr("qk_matmul_output_mode", 0))
    qk_out = scores
    bias = None if mask is None else _as_bias(mask, q)
    logits = scores if bias is None else ew.add(scores, bias)
    if mode == 2:
        qk_out = logits
    precision = ctx.attr("softmax_precision")
    if precision:
        logits = ew.cast(logits, to_dtype(precision, f"{ctx.where}: attribute 'softmax_precision'"))
    probs = act.softmax(logits, -1)
    if bias is not None:  # a query whose keys are all masked gets zeros, not NaN
        blocked = ew.eq(reduction.amax(bias, -1, True), constant(np.array(-math.inf, bias.dtype.np)))
        probs = ew.where(blocked, constant(np.array(0, probs.dtype.np)), probs)
    if mode == 3:
        qk_out = probs
    probs = ew.cast(probs, q.dtype)
    return linalg.matmul(probs, v), ew.cast(qk_out, q.dtype)


@converter("Attention")
def attention(ctx, q, k, v, mask=None, past_key=None, past_value=None, nonpad=None):
    three_d = q.ndim == 3
    if three_d:
        q = _heads(q, int(ctx.attr("q_num_heads")))
        k = _heads(k, int(ctx.attr("kv_num_heads")))
        v = _heads(v, int(ctx.attr("kv_num_heads")))
    past = 0
    if past_key is not None:
        past = past_key.shape[2]
        k = movement.cat([past_key, k], 2)
        v = movement.cat([past_value, v], 2)
    present_key, present_value = k, v
    scale = ctx.attr("scale")
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    mask = _allowed_mask(ctx, q, k, mask, past, nonpad)
    fused = (not ctx.output_used(3) and not ctx.attr("softcap") and not ctx.attr("softmax_precision")
             and (mask is None or mask.ndim <= 4))
    if fused:
        y = scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale, enable_gqa=q.shape[1] != k.shape[1])
        qk_out = None
    else:
        y, qk_out = _spelled_out(ctx, q, k, v, mask, scale)
    if three_d:
        y = _merge_heads(y)
    return y, present_key, present_value, qk_out


@converter("RotaryEmbedding")
def rotary_embedding(ctx, x, cos, sin, position_ids=None):
    """Rotate pairs of features by the angles of each position (RoPE): the first and second
    halves of the rotated features (or even and odd ones, ``interleaved``)."""
    four_d = x.ndim == 4
    y = movement.permute(x, (0, 2, 1, 3)) if four_d else x  # (B, L, H, D) or (B, L, H·D)
    if not four_d:
        b, length, hidden = y.shape
        heads = int(ctx.attr("num_heads"))
        y = movement.reshape(y, (b, length, heads, hidden // heads))
    head = y.shape[-1]
    dim = int(ctx.attr("rotary_embedding_dim", 0) or head)
    if position_ids is not None:  # caches indexed by position: (B, L, dim / 2)
        cos, sin = _rows(cos, position_ids), _rows(sin, position_ids)
    rotated = _rotate(y, cos, sin, ctx.attr("interleaved", 0), dim)
    if four_d:
        return movement.contiguous(movement.permute(rotated, (0, 2, 1, 3)))
    return movement.reshape(rotated, tuple(x.shape))


def _rotate(x, cos, sin, interleaved: bool, dim: int):
    """RoPE on (B, S, N, H) features with per-position tables (B, S, dim / 2): the first ``dim``
    features rotated in pairs (halves, or even/odd with ``interleaved``), the rest kept."""
    head = x.shape[-1]
    cos, sin = movement.unsqueeze(cos, -2), movement.unsqueeze(sin, -2)
    part = getitem(x, (Ellipsis, slice(0, dim)))
    if interleaved:
        x1, x2 = getitem(part, (Ellipsis, slice(0, dim, 2))), getitem(part, (Ellipsis, slice(1, dim, 2)))
    else:
        x1, x2 = getitem(part, (Ellipsis, slice(0, dim // 2))), getitem(part, (Ellipsis, slice(dim // 2, dim)))
    real = ew.sub(ew.mul(cos, x1), ew.mul(sin, x2))
    imag = ew.add(ew.mul(sin, x1), ew.mul(cos, x2))
    if interleaved:
        rotated = movement.reshape(movement.stack([real, imag], -1), tuple(part.shape))
    else:
        rotated = movement.cat([real, imag], -1)
    if dim < head:
        rotated = movement.cat([rotated, getitem(x, (Ellipsis, slice(dim, head)))], -1)
    return rotated


def _rows(cache, ids):
    """cache[ids]: the cache's rows at the positions ``ids`` (any shape)."""
    from ...dispatch import apply
    from ...ops.indexing import Index

    return apply(Index, cache, ew.cast(ids, _dt.int64), items=[["t", 0]])


@converter("ai.onnx.preview.FlexAttention")
def flex_attention(ctx, q, k, v):
    """softmax(score_mod(q kᵀ·scale)) v, then ``prob_mod`` of the probabilities: the two mods are
    subgraphs of the node, run on the scores (in float32 for half inputs, or
    ``softmax_precision``)."""
    rep = q.shape[1] // k.shape[1]
    k, v = _repeat_kv(k, rep), _repeat_kv(v, rep)
    scale = ctx.attr("scale")
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    scores = ew.mul(linalg.matmul(q, movement.transpose(k, -1, -2)), scale)
    precision = ctx.attr("softmax_precision")
    if precision:
        compute = to_dtype(precision, f"{ctx.where}: attribute 'softmax_precision'")
    else:
        compute = _dt.float32 if q.dtype.itemsize < 4 else q.dtype
    scores = ew.cast(scores, compute)
    if ctx.attr("score_mod") is not None:
        scores = ew.cast(ctx.subgraphs.run(ctx.attr("score_mod"), [scores], "score_mod")[0], compute)
    probs = act.softmax(scores, -1)
    if ctx.attr("prob_mod") is not None:
        probs = ew.cast(ctx.subgraphs.run(ctx.attr("prob_mod"), [probs], "prob_mod")[0], compute)
    return ew.cast(linalg.matmul(probs, ew.cast(v, compute)), v.dtype)
