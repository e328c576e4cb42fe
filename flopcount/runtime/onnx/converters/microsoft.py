"""The com.microsoft ops that onnxruntime's transformer optimizer and LLM exports (onnxruntime
GenAI's builder, Olive) write: fused attention (Attention, MultiHeadAttention,
GroupQueryAttention), fused norms (SkipLayerNormalization, SkipSimplifiedLayerNormalization,
SimplifiedLayerNormalization, BERT's EmbedLayerNormalization), GELU forms (Gelu, BiasGelu, FastGelu, QuickGelu),
RotaryEmbedding, and the quantized matmuls MatMulNBits, MatMulIntegerToFloat and QOrderedMatMul.

Each is written with the runtime's ops whose math is the same, so its count is theirs: the
attention is one ``scaled_dot_product_attention`` (its contractions are attention MACs) after
the input projection and the masks onnxruntime applies, a skip norm is the adds and the norm,
MatMulNBits is ``quantized_linear`` (the int4 weight read at 4 bits plus its block scales, as
a fused W4A16 kernel reads it). Attributes the schema defaults are defaulted here, since the
``onnx`` package does not know com.microsoft's schemas.
"""

from __future__ import annotations

import math

import numpy as np

from ... import dtypes as _dt
from ...ops import activations as act
from ...ops import elementwise as ew
from ...ops import linalg, movement, norm, reduction
from ...ops.attention import scaled_dot_product_attention
from ...ops.indexing import index_select
from ...ops.quantized import quantized_linear
from ._base import PACKED_WEIGHTS, constant, converter
from .attention import _heads, _merge_heads, _rotate, _rows
from .nn import rms_norm
from .quantized import _minus_zero_point, _row_zero_point

MS = "com.microsoft."


# --- activations ---------------------------------------------------------------------------------

@converter(MS + "Gelu")
def gelu(ctx, x):
    return act.gelu(x)


@converter(MS + "BiasGelu")
def bias_gelu(ctx, x, bias):
    return act.gelu(ew.add(x, bias))


@converter(MS + "FastGelu")
def fast_gelu(ctx, x, bias=None):
    """The tanh approximation of GELU, of ``x + bias``."""
    return act.gelu(x if bias is None else ew.add(x, bias), approximate="tanh")


@converter(MS + "QuickGelu")
def quick_gelu(ctx, x):
    """x·sigmoid(alpha·x) (CLIP's GELU, alpha 1.702)."""
    return ew.mul(x, act.sigmoid(ew.mul(x, float(ctx.attr("alpha", 1.702)))))


# --- norms -------------------------------------------------------------------------------------

def _skip_sum(x, skip, bias):
    """input + skip (+ bias): the residual sum the fused norms normalize (and may return)."""
    if tuple(skip.shape) != tuple(x.shape):  # a skip of (S, D) or (1, S, D) broadcast over batches
        skip = movement.expand(skip, tuple(x.shape))
    total = ew.add(x, skip)
    return total if bias is None else ew.add(total, bias)


def _unused_statistics(ctx, first: int) -> None:
    """Outputs ``first`` and ``first + 1`` (mean, inverse std) are training-only: refuse them."""
    for i in (first, first + 1):
        if ctx.output_used(i):
            raise ctx.unsupported(f"output {i} (the normalization's statistics) is not supported")


@converter(MS + "SkipLayerNormalization")
def skip_layer_norm(ctx, x, skip, gamma, beta=None, bias=None):
    """layer_norm(input + skip + bias) · gamma + beta; output 3 is the sum before the norm."""
    _unused_statistics(ctx, 1)
    total = _skip_sum(x, skip, bias)
    hidden = (x.shape[-1],)
    y = norm.layer_norm(total, hidden, gamma, beta, float(ctx.attr("epsilon", 1e-12)))
    return y, None, None, total


@converter(MS + "SkipSimplifiedLayerNormalization")
def skip_simplified_layer_norm(ctx, x, skip, gamma, bias=None):
    """rms_norm(input + skip + bias) · gamma; output 3 is the sum before the norm."""
    _unused_statistics(ctx, 1)
    total = _skip_sum(x, skip, bias)
    y = norm.rms_norm(total, (x.shape[-1],), gamma, float(ctx.attr("epsilon", 1e-12)))
    return y, None, None, total


@converter("SimplifiedLayerNormalization", MS + "SimplifiedLayerNormalization")
def simplified_layer_norm(ctx, x, scale):
    """RMS norm over the dims from ``axis`` on. onnxruntime registers it in ONNX's own domain
    (where Llama exports write it), and the optimizer may write it in com.microsoft."""
    if ctx.output_used(1):
        raise ctx.unsupported("output 1 (the inverse standard deviation) is not supported")
    return rms_norm(ctx, x, scale)  # ONNX's RMSNormalization: the same attributes and defaults


@converter(MS + "EmbedLayerNormalization")
def embed_layer_norm(ctx, input_ids, segment_ids, word, position, segment=None, gamma=None, beta=None, mask=None,
                     position_ids=None):
    """BERT's embeddings fused: layer_norm(word[ids] + position[0 .. S-1 or position_ids] +
    segment[segment_ids]); output 1 is the key lengths (the mask summed per row) Attention reads,
    output 2 the sum before the norm."""
    from ...ops.embedding import embedding

    b, s = input_ids.shape
    if position_ids is None:
        position_ids = constant(np.arange(s, dtype=np.int64).reshape(1, s))
    total = ew.add(embedding(ew.cast(input_ids, _dt.int64), word),
                   embedding(ew.cast(position_ids, _dt.int64), position))
    if segment is not None and segment_ids is not None:
        total = ew.add(total, embedding(ew.cast(segment_ids, _dt.int64), segment))
    y = norm.layer_norm(total, (word.shape[-1],), gamma, beta, float(ctx.attr("epsilon", 1e-12)))
    if mask is not None:
        lengths = ew.cast(reduction.sum(ew.cast(mask, _dt.int64), 1), _dt.int32)
    else:
        lengths = constant(np.zeros(b, np.int32))
    return y, lengths, total


# --- rotary embedding --------------------------------------------------------------------------

def _positions(position_ids, batch: int, length: int):
    """Position ids (B, S): as given, or from one offset (shape (1,)): offset + 0 .. S-1."""
    ids = ew.cast(position_ids, _dt.int64)
    if ids.ndim == 2:
        return ids
    offset = movement.reshape(ids, (1, 1))
    return movement.expand(ew.add(offset, constant(np.arange(length, dtype=np.int64).reshape(1, length))),
                           (batch, length))


def _rope_bsnh(x, cos_cache, sin_cache, positions, interleaved: bool, dim: int):
    """``x`` (B, S, N, H) rotated at ``positions`` (B, S) read from the caches (max, dim / 2)."""
    cos, sin = _rows(cos_cache, positions), _rows(sin_cache, positions)
    return _rotate(x, ew.cast(cos, x.dtype), ew.cast(sin, x.dtype), interleaved, dim)


@converter(MS + "RotaryEmbedding")
def rotary_embedding(ctx, x, position_ids, cos_cache, sin_cache):
    """com.microsoft's RotaryEmbedding: input (B, S, N·H) or (B, N, S, H); position ids (B, S)
    or one offset; caches (max positions, rotary dim / 2). Packed batching
    (``is_packed_batching``: a ragged batch's sequences end to end in one row, each token's
    position within its own sequence in ``position_ids``) is the same per-token rotation, as
    onnxruntime's kernel computes it."""
    if x.ndim not in (3, 4):
        raise ctx.unsupported(f"an input of shape {tuple(x.shape)} is not supported (expects (B, S, N·H) or "
                              f"(B, N, S, H))")
    four_d = x.ndim == 4
    if four_d:
        y = movement.permute(x, (0, 2, 1, 3))
    else:
        heads = int(ctx.attr("num_heads", 0))
        b, length, hidden = x.shape
        head = 2 * cos_cache.shape[-1] if heads == 0 else hidden // heads
        y = movement.reshape(x, (b, length, hidden // head, head))
    dim = int(ctx.attr("rotary_embedding_dim", 0) or y.shape[-1])
    positions = _positions(position_ids, y.shape[0], y.shape[1])
    rotated = _rope_bsnh(y, cos_cache, sin_cache, positions, bool(ctx.attr("interleaved", 0)), dim)
    if four_d:
        return movement.contiguous(movement.permute(rotated, (0, 2, 1, 3)))
    return movement.reshape(rotated, tuple(x.shape))


# --- attention ---------------------------------------------------------------------------------

def _scale(ctx, head: int) -> float:
    scale = float(ctx.attr("scale", 0.0) or 0.0)
    return scale if scale else 1.0 / math.sqrt(head)


def _causal(lq: int, lk: int):
    """True where query i may see key j: j <= i + (Lk - Lq) (the new queries are the last)."""
    return np.arange(lk).reshape(1, lk) <= np.arange(lq).reshape(lq, 1) + (lk - lq)


def _additive(allowed, filter_value: float, dtype):
    """A bool mask (True: attend) as the additive bias onnxruntime's kernels use: 0 or the
    node's ``mask_filter_value`` (a large negative number, not -inf)."""
    zero, masked = constant(np.array(0, dtype.np)), constant(np.array(filter_value, dtype.np))
    return ew.where(allowed, zero, masked)


def _key_mask(ctx, mask, batch: int, lq: int, lk: int):
    """onnxruntime's key mask as a bool (B, 1, Lq or 1, Lk) mask: key lengths (B), end and start
    positions (2B), a 0/1 matrix (B, Lk) or (B, Lq, Lk)."""
    if mask.ndim == 1:
        keys = constant(np.arange(lk, dtype=np.int64).reshape(1, lk))
        ends = ew.cast(movement.narrow(mask, 0, 0, batch), _dt.int64)
        allowed = ew.lt(keys, movement.reshape(ends, (batch, 1)))
        if mask.shape[0] == 2 * batch:
            starts = ew.cast(movement.narrow(mask, 0, batch, batch), _dt.int64)
            allowed = ew.logical_and(allowed, ew.ge(keys, movement.reshape(starts, (batch, 1))))
        return movement.reshape(allowed, (batch, 1, 1, lk))
    if mask.ndim == 2:
        return movement.reshape(ew.ne(mask, constant(np.array(0, mask.dtype.np))), (mask.shape[0], 1, 1, lk))
    if mask.ndim == 3:
        return movement.unsqueeze(ew.ne(mask, constant(np.array(0, mask.dtype.np))), 1)
    raise ctx.unsupported(f"a mask of shape {tuple(mask.shape)} is not supported (expects (B), (2B), (B, L) "
                          f"or (B, S, L))")


def _attend(ctx, q, k, v, allowed, bias, scale: float):
    """Attention of (B, N, S, H) heads with a bool mask and an additive bias (each optional):
    one ``scaled_dot_product_attention``, the masked scores at ``mask_filter_value``."""
    mask = None
    if allowed is not None:
        mask = _additive(allowed, float(ctx.attr("mask_filter_value", -10000.0)), q.dtype)
    if bias is not None:
        mask = ew.cast(bias, q.dtype) if mask is None else ew.add(mask, ew.cast(bias, q.dtype))
    return scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale, enable_gqa=q.shape[1] != k.shape[1])


def _combine(first, second):
    if first is None:
        return second
    return second if second is None else ew.logical_and(first, second)


@converter(MS + "Attention")
def attention(ctx, x, weights, bias=None, mask_index=None, past=None, attention_bias=None,
              past_sequence_length=None):
    """BERT's and GPT-2's fused self-attention: one packed Q/K/V projection, the heads, the
    key mask and causal mask, softmax(q kᵀ·scale + masks) v; ``present`` stacks the keys and
    values (past ones first)."""
    for attr in ("do_rotary", "past_present_share_buffer"):
        if ctx.attr(attr, 0):
            raise ctx.unsupported(f"attribute {attr}=1 is not supported")
    heads = int(ctx.attr("num_heads"))
    sizes = ctx.attr("qkv_hidden_sizes") or [weights.shape[1] // 3] * 3
    qkv = linalg.matmul(x, weights)
    if bias is not None:
        qkv = ew.add(qkv, bias)
    q, k, v = movement.split(qkv, [int(s) for s in sizes], -1)
    q, k, v = _heads(q, heads), _heads(k, heads), _heads(v, heads)
    if past is not None:
        k = movement.cat([movement.squeeze(movement.narrow(past, 0, 0, 1), 0), k], 2)
        v = movement.cat([movement.squeeze(movement.narrow(past, 0, 1, 1), 0), v], 2)
    batch, lq, lk = q.shape[0], q.shape[2], k.shape[2]
    allowed = None if mask_index is None else _key_mask(ctx, mask_index, batch, lq, lk)
    if ctx.attr("unidirectional", 0):
        allowed = _combine(allowed, constant(_causal(lq, lk)))
    y = _merge_heads(_attend(ctx, q, k, v, allowed, attention_bias, _scale(ctx, q.shape[-1])))
    present = movement.stack([k, v], 0) if ctx.output_used(1) else None
    return y, present


def _bias_parts(bias, q, k, v):
    """The packed projection bias (3·D) split over q, k and v."""
    if bias is None:
        return q, k, v
    parts = movement.split(bias, [q.shape[-1], k.shape[-1], v.shape[-1]], 0)
    return tuple(ew.add(t, b) for t, b in zip((q, k, v), parts))


@converter(MS + "MultiHeadAttention")
def multi_head_attention(ctx, query, key=None, value=None, bias=None, key_padding_mask=None,
                         attention_bias=None, past_key=None, past_value=None, past_sequence_length=None,
                         cache_indirection=None):
    """Attention after the projections: query (B, S, D); key and value (B, L, D), or already
    split into heads (B, N, L, H); or Q, K and V packed in the query (B, S, N, 3, H)."""
    if cache_indirection is not None:
        raise ctx.unsupported("cache_indirection (beam search) is not supported")
    heads = int(ctx.attr("num_heads"))
    if query.ndim == 5:  # packed (B, S, N, 3, H)
        b, s, n, _, h = query.shape
        q, k, v = (movement.permute(movement.squeeze(t, 3), (0, 2, 1, 3)) for t in movement.split(query, 1, 3))
    elif key is not None and key.ndim == 5:  # packed key and value (B, L, N, 2, H)
        k, v = (movement.permute(movement.squeeze(t, 3), (0, 2, 1, 3)) for t in movement.split(key, 1, 3))
        q = _heads(query if bias is None else ew.add(query, movement.narrow(bias, 0, 0, query.shape[-1])), heads)
    elif key is not None and key.ndim == 4:  # keys and values already in heads (cross attention caches)
        q = _heads(query if bias is None else ew.add(query, movement.narrow(bias, 0, 0, query.shape[-1])), heads)
        k, v = key, value
    else:
        q, k, v = _bias_parts(bias, query, key, value)
        q, k, v = _heads(q, heads), _heads(k, heads), _heads(v, heads)
    if past_key is not None:
        k, v = movement.cat([past_key, k], 2), movement.cat([past_value, v], 2)
    batch, lq, lk = q.shape[0], q.shape[2], k.shape[2]
    allowed = None if key_padding_mask is None else _key_mask(ctx, key_padding_mask, batch, lq, lk)
    if ctx.attr("unidirectional", 0):
        allowed = _combine(allowed, constant(_causal(lq, lk)))
    y = _merge_heads(_attend(ctx, q, k, v, allowed, attention_bias, _scale(ctx, q.shape[-1])))
    return y, k, v


def _present(new, past, past_lengths, length: int):
    """The key or value cache after a step, (B, Nkv, ``length``, H): sequence b's first
    ``past_lengths[b]`` rows of ``past``, its S new rows after them, zeros after those (as
    onnxruntime leaves them). This is both layouts GroupQueryAttention reads: a past of exactly
    the earlier tokens (``length`` = past + S), and one buffer of a maximum length that past and
    present share, each sequence's valid rows at its start (``length`` = the buffer's)."""
    from ...ops.indexing import getitem

    b, heads, s, head = new.shape
    if past is None and length == s:
        return new
    parts = ([] if past is None else [past]) + [new, constant(np.zeros((b, heads, 1, head), new.dtype.np))]
    source = movement.cat(parts, 2)
    buffer = source.shape[2] - s - 1
    rows = constant(np.arange(length, dtype=np.int64).reshape(1, length))
    offset = ew.sub(rows, movement.reshape(past_lengths, (b, 1)))  # row j's place among the new rows
    fresh = ew.where(ew.lt(offset, s), ew.add(offset, buffer), constant(np.array(buffer + s, np.int64)))
    index = ew.where(ew.lt(offset, 0), movement.expand(rows, (b, length)), fresh)
    batch = constant(np.arange(b, dtype=np.int64).reshape(b, 1))
    return movement.permute(getitem(source, (batch, slice(None), index)), (0, 2, 1, 3))


@converter(MS + "GroupQueryAttention")
def group_query_attention(ctx, query, key=None, value=None, past_key=None, past_value=None, seqlens_k=None,
                          total_sequence_length=None, cos_cache=None, sin_cache=None, position_ids=None,
                          attention_bias=None, head_sink=None):
    """Causal grouped-query attention of LLM exports: query (B, S, N·H) and key, value
    (B, S, Nkv·H), or all three packed in the query; optional rotary embedding of q and k
    (``do_rotary``); the new keys and values written after each sequence's past ones.

    Sequence b holds ``seqlens_k[b] + 1`` tokens in all, the last S of them new (all of them in
    a first prompt, where S is ``total_sequence_length``): its queries sit at positions
    ``seqlens_k[b] + 1 - S`` on, which the rotary positions, the causal mask and where the new
    keys go read. The past is either the earlier tokens (present = past + new) or a buffer of a
    maximum length shared with the present, right-padded per sequence; either way the attention
    reads the first ``total_sequence_length`` keys (the batch's longest sequence), not the
    buffer's padding, and is counted over them."""
    for attr in ("softcap", "smooth_softmax"):
        if ctx.attr(attr, 0):
            raise ctx.unsupported(f"attribute {attr} is not supported")
    if head_sink is not None or position_ids is not None:
        raise ctx.unsupported("head_sink and position_ids inputs are not supported")
    if seqlens_k is None or total_sequence_length is None:
        raise ctx.unsupported("inputs seqlens_k and total_sequence_length are required")
    heads, kv_heads = int(ctx.attr("num_heads")), int(ctx.attr("kv_num_heads"))
    b, s, width = query.shape
    if key is None:  # packed Q, K, V
        head = width // (heads + 2 * kv_heads)
        query, key, value = movement.split(query, [heads * head, kv_heads * head, kv_heads * head], -1)
    head = query.shape[-1] // heads
    q = movement.reshape(query, (b, s, heads, head))
    k = movement.reshape(key, (b, s, kv_heads, head))
    total = int(ctx.scalar(total_sequence_length, "total_sequence_length"))
    buffer = 0 if past_key is None else past_key.shape[2]
    if total < s or total > buffer + s:
        raise ctx.unsupported(f"total_sequence_length {total} does not fit {s} new token(s) after a past of "
                              f"{buffer}")
    # each sequence's past length: seqlens_k + 1 - S, and 0 in a first prompt (onnxruntime's test)
    if s == total:
        past_lengths = constant(np.zeros(b, np.int64))
    else:
        past_lengths = ew.sub(ew.cast(seqlens_k, _dt.int64), s - 1)
    positions = ew.add(movement.reshape(past_lengths, (b, 1)), constant(np.arange(s, dtype=np.int64).reshape(1, s)))
    if ctx.attr("do_rotary", 0):
        interleaved = bool(ctx.attr("rotary_interleaved", 0))
        dim = 2 * cos_cache.shape[-1]
        q = _rope_bsnh(q, cos_cache, sin_cache, positions, interleaved, dim)
        k = _rope_bsnh(k, cos_cache, sin_cache, positions, interleaved, dim)
    q = movement.permute(q, (0, 2, 1, 3))
    length = max(total, buffer)
    present_k = _present(movement.permute(k, (0, 2, 1, 3)), past_key, past_lengths, length)
    present_v = _present(_heads(value, kv_heads), past_value, past_lengths, length)
    keys, values = (t if length == total else movement.narrow(t, 2, 0, total) for t in (present_k, present_v))
    # query i (at position past + i) sees key j when j <= past + i, and within the window
    rows = movement.reshape(positions, (b, 1, s, 1))
    cols = constant(np.arange(total, dtype=np.int64).reshape(1, 1, 1, total))
    allowed = ew.le(cols, rows)
    window = int(ctx.attr("local_window_size", -1))
    if window > 0:
        allowed = ew.logical_and(allowed, ew.gt(cols, ew.sub(rows, window)))
    y = _merge_heads(_attend(ctx, q, keys, values, allowed, attention_bias, _scale(ctx, head)))
    return y, present_k, present_v


# --- quantized matmuls -------------------------------------------------------------------------

def nbits_layout(attrs: dict) -> tuple:
    """(bits, block size, K, N) of a MatMulNBits node's attributes."""
    return int(attrs.get("bits", 4)), int(attrs["block_size"]), int(attrs["K"]), int(attrs["N"])


def unpack_nbits(packed: np.ndarray | None, dims: tuple, attrs: dict):
    """MatMulNBits' packed weight (N, blocks, block·bits/8) of uint8 as the signed (N, K) weight
    it stands for, q − 2^(bits−1) (int4 for 4 bits, int8 for 8): the zero point the file
    omits (2^(bits−1)) taken out, so the weight and its scales are ``quantized_linear``'s.
    Returns (array or None for a meta import, shape, dtype)."""
    bits, block, k, n = nbits_layout(attrs)
    dtype = {4: _dt.int4, 8: _dt.int8}.get(bits)
    if dtype is None or k % block or len(dims) != 3 or dims[0] != n or dims[1] * block != k:
        raise ValueError(f"MatMulNBits weight of shape {tuple(dims)} with bits={bits}, block_size={block}, K={k}, "
                         f"N={n}: only 4- and 8-bit weights whose blocks tile K are supported")
    if packed is None:
        return None, (n, k), dtype
    flat = packed.reshape(n, -1)
    if bits == 4:
        values = np.stack([flat & 0x0F, flat >> 4], -1).reshape(n, -1)
    else:
        values = flat
    signed = values[:, :k].astype(np.int16) - (1 << (bits - 1))
    return signed.astype(dtype.np), (n, k), dtype


def _nbits_zero_points(ctx, zero_points, n: int, blocks: int, bits: int):
    """Zero points as float (N, blocks) less 2^(bits−1): packed uint8 (two per byte for 4
    bits, each row padded to whole bytes) or in the scales' floating type."""
    if zero_points.dtype.is_floating_point:
        return ew.sub(movement.reshape(zero_points, (n, blocks)), float(1 << (bits - 1)))
    packed = ctx.const(zero_points, "zero_points").astype(np.uint8).reshape(n, -1)
    values = np.stack([packed & 0x0F, packed >> 4], -1).reshape(n, -1) if bits == 4 else packed
    return constant((values[:, :blocks].astype(np.float32) - (1 << (bits - 1))))


PACKED_WEIGHTS[MS + "MatMulNBits"] = (1, unpack_nbits)


def _act_order(ctx, g_idx, blocks: int, block: int):
    """The order of K that makes g_idx's groups contiguous blocks (GPTQ's act-order weights:
    column k is scaled by group ``g_idx[k]``), as a constant index; None when g_idx is already
    k // block. Groups must hold ``block`` columns each, as the scales' shape says."""
    groups = ctx.const(g_idx, "g_idx").astype(np.int64).reshape(-1)
    order = np.argsort(groups, kind="stable")
    if groups.size != blocks * block or not np.array_equal(groups[order], np.repeat(np.arange(blocks), block)):
        sizes = np.bincount(np.clip(groups, 0, blocks), minlength=blocks + 1)[:blocks]
        raise ctx.unsupported(f"g_idx of {groups.size} column(s) does not put {block} in each of the {blocks} "
                              f"groups (group sizes {sizes.tolist()[:8]}{'...' if blocks > 8 else ''}; values "
                              f"{groups.min() if groups.size else None}..{groups.max() if groups.size else None})")
    if np.array_equal(order, np.arange(order.size)):
        return None
    return constant(order)


@converter(MS + "MatMulNBits")
def matmul_nbits(ctx, a, b, scales, zero_points=None, g_idx=None, bias=None):
    """A (..., K) times the block-quantized weight (N, K)ᵀ: ``quantized_linear`` on the
    importer's unpacked weight (4 bits each) and its scales (N, K / block). Zero points the
    file gives subtract their share per block: y −= Σ_block(a) · (zp·scale)ᵀ. With g_idx
    (act-order groups) A's columns and the weight's are gathered into group order first: the
    same MACs, plus the two gathers' bytes each run (a kernel that reorders the weight when it
    loads it reads it once)."""
    bits, block, k, n = nbits_layout(ctx.attrs)
    if b.ndim != 2:
        raise ctx.unsupported("the weight must be an initializer (the importer unpacks it)")
    blocks = k // block
    order = None if g_idx is None else _act_order(ctx, g_idx, blocks, block)
    if order is not None:  # the block layout the scales assume: A's columns and the weight's, reordered alike
        a, b = index_select(a, -1, order), index_select(b, 1, order)
    scale = movement.reshape(scales, (n, blocks))
    y = quantized_linear(a, b, scale)
    if zero_points is not None:
        offsets = ew.cast(ew.mul(_nbits_zero_points(ctx, zero_points, n, blocks, bits), ew.cast(scale, _dt.float32)),
                          a.dtype)
        sums = reduction.sum(movement.reshape(a, tuple(a.shape[:-1]) + (blocks, block)), -1)
        y = ew.sub(y, linalg.matmul(sums, movement.transpose(offsets, 0, 1)))
    return y if bias is None else ew.add(y, bias)


@converter(MS + "MatMulIntegerToFloat")
def matmul_integer_to_float(ctx, a, b, a_scale, b_scale, a_zero_point=None, b_zero_point=None, bias=None):
    """(A − a_zp)(B − b_zp) in int32, times a_scale · b_scale (per tensor or per column of B),
    plus bias: a dynamically quantized MatMul's integer GEMM and its float output."""
    product = linalg.matmul(_minus_zero_point(a, _row_zero_point(a_zero_point, a)), _minus_zero_point(b, b_zero_point))
    y = ew.mul(ew.cast(product, a_scale.dtype), ew.mul(a_scale, b_scale))
    return y if bias is None else ew.add(y, bias)


# cuBLASLt's matrix orders, as QuantizeWithOrder's schema numbers them
_ORDERS = {0: "ORDER_COL", 1: "ORDER_ROW", 2: "ORDER_COL32", 3: "ORDER_COL4_4R2_8C", 4: "ORDER_COL32_2R_4R4"}


@converter(MS + "QOrderedMatMul")
def qordered_matmul(ctx, a, scale_a, b, scale_b, scale_y, bias=None, c=None, scale_c=None):
    """int8 Y = saturate(round(scale_A·scale_B / scale_Y · (A B) + scale_C / scale_Y · C + bias)):
    the int8 GEMM of A (..., M, K) in rows and B (K, N) stored column by column, accumulated in
    int32, with scale_B one value or one per column. Only that layout is run (order_A and
    order_Y ORDER_ROW, order_B ORDER_COL), the one onnxruntime's CUDA kernel accepts; the tiled
    orders (COL32, COL4_4R2_8C, COL32_2R_4R4) are refused."""
    for name, wanted in (("A", 1), ("B", 0), ("Y", 1)):
        order = int(ctx.attr(f"order_{name}", -1))
        if order != wanted:
            raise ctx.unsupported(f"order_{name}={order} ({_ORDERS.get(order, 'not a cuBLASLt order')}) is not "
                                  f"supported: only order_A=1 (ORDER_ROW), order_B=0 (ORDER_COL), order_Y=1")
    if b.ndim not in (2, 3):
        raise ctx.unsupported(f"B of shape {tuple(b.shape)} is not supported (expects (K, N) or (batch, K, N))")
    k, n = b.shape[-2:]
    # B's (K, N) elements are stored column by column: read in rows, the buffer is Bᵀ (N, K)
    columns = movement.reshape(b, tuple(b.shape[:-2]) + (n, k))
    product = linalg.matmul(ew.cast(a, _dt.int32), ew.cast(movement.transpose(columns, -1, -2), _dt.int32))
    y = ew.mul(ew.cast(product, _dt.float32), ew.div(ew.mul(scale_a, scale_b), scale_y))
    if c is not None:
        y = ew.add(y, ew.mul(ew.cast(c, _dt.float32), ew.div(scale_c, scale_y)))
    if bias is not None:
        y = ew.add(y, bias)
    return ew.cast(ew.clamp(ew.round(y), -128.0, 127.0), _dt.int8)
