"""Pieces the Hugging Face-style text transformers share (bert.py, gpt2.py, llama.py).

Attention runs one of two ways, chosen by ``attn_implementation`` as in transformers:

* ``"eager"`` (the default): Hugging Face's ``eager_attention_forward`` written out op by op:
  ``matmul`` (QKᵀ), ``mul`` (scale), ``add`` (mask), ``softmax``, dropout, ``matmul`` (PV). Both
  contractions are plain ``matmul`` ops, so every counter sees B·H·Lq·Lk·(D + Dv) MACs, and the
  mask add and softmax appear as their own rows.
* ``"sdpa"``: one ``scaled_dot_product_attention`` op; decoders pass ``is_causal=True`` when no
  padding mask is given (a boolean mask otherwise). The op's cost rule counts the same two
  contractions (COUNTING.md, attention row).

Masks follow transformers: the eager path adds 0 where a position may be attended and the
minimum of the scores' dtype where it may not; the sdpa path takes the boolean "may attend" mask
itself. Decoders with a KV cache build theirs with ``decoder_mask`` from the positions of the new
queries and of the cached keys (a sliding window hides keys more than ``window`` positions back).
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import fields
from typing import Iterator

import ml_dtypes

from .. import runtime as rt
from ..runtime import nn
from ..runtime.nn import functional as F


def mask_min(dtype) -> float:
    """The most negative finite value of ``dtype``: what a masked score gets in that dtype
    (transformers masks with ``torch.finfo(dtype).min`` rather than -inf, so a fully masked
    row stays finite)."""
    return float(ml_dtypes.finfo(rt.get_dtype(dtype).np).min)


IMPLEMENTATIONS = ("eager", "sdpa")


def activation(name: str) -> nn.Module:
    """The module transformers' ``ACT2FN[name]`` builds, for the names these models use."""
    table = {
        "gelu": lambda: nn.GELU(),  # erf form (BERT)
        "gelu_new": lambda: nn.GELU(approximate="tanh"),  # tanh form (GPT-2's NewGELUActivation)
        "gelu_pytorch_tanh": lambda: nn.GELU(approximate="tanh"),
        "silu": lambda: nn.SiLU(),
        "relu": lambda: nn.ReLU(),
        "tanh": lambda: nn.Tanh(),
    }
    if name not in table:
        raise ValueError(f"unsupported activation {name!r}; known: {sorted(table)}")
    return table[name]()


def check_implementation(name: str) -> str:
    if name not in IMPLEMENTATIONS:
        raise ValueError(f"attn_implementation must be one of {IMPLEMENTATIONS}, got {name!r}")
    return name


def check_heads(config, width: str, heads: str) -> None:
    """A config's ``attn_implementation`` is one of IMPLEMENTATIONS and its ``width`` field a
    multiple of its ``heads`` field; a ValueError naming the config and both values otherwise."""
    check_implementation(config.attn_implementation)
    if getattr(config, width) % getattr(config, heads):
        raise ValueError(f"{type(config).__name__}: {width} {getattr(config, width)} is not a multiple of "
                         f"{heads} {getattr(config, heads)}")


def config_from(cls, overrides: dict):
    """``cls(**overrides)`` with a one-line error naming any unknown option."""
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise TypeError(f"{cls.__name__}: unknown option(s) {unknown}; known: {sorted(known)}")
    return cls(**overrides)


class SwitchableAttention:
    """Mixin of the top-level text models: ``set_attn_implementation`` as in transformers."""

    def set_attn_implementation(self, attn_implementation: str) -> None:
        """Run every attention layer as ``"eager"`` (explicit matmuls) or ``"sdpa"`` (one fused op);
        the layers share the model's config, so they all switch at once."""
        self.config.attn_implementation = check_implementation(attn_implementation)


# --- heads ------------------------------------------------------------------------------------

def split_heads(x, head_dim: int):
    """(B, L, H·D) -> (B, H, L, D)."""
    return x.reshape(x.shape[0], x.shape[1], -1, head_dim).transpose(1, 2)


def merge_heads(x):
    """(B, H, L, D) -> (B, L, H·D)."""
    b, h, length, d = x.shape
    return x.transpose(1, 2).reshape(b, length, h * d)


def repeat_kv(x, n_rep: int):
    """(B, Hkv, L, D) -> (B, Hkv·n_rep, L, D), each key/value head repeated for its query group."""
    if n_rep == 1:
        return x
    b, h, length, d = x.shape
    return x.unsqueeze(2).expand(b, h, n_rep, length, d).reshape(b, h * n_rep, length, d)


# --- masks ------------------------------------------------------------------------------------

def padding_keep(attention_mask):
    """(B, Lk) ones/zeros -> (B, 1, 1, Lk) bool: True where a key may be attended."""
    b, length = attention_mask.shape
    return (attention_mask != 0).reshape(b, 1, 1, length)


def causal_keep(length: int, device):
    """(L, L) bool, True on and below the diagonal: query i sees keys 0..i."""
    return rt.tril(rt.ones(length, length, dtype=rt.bool_, device=device))


def keep_mask(attention_mask, length: int, device, causal: bool):
    """The boolean "may attend" mask (None when everything may attend)."""
    keep = causal_keep(length, device) if causal else None
    if attention_mask is not None:
        pad = padding_keep(attention_mask)
        keep = pad if keep is None else rt.logical_and(keep, pad)
    return keep


def additive_mask(keep, dtype=rt.float32):
    """Bool "may attend" -> 0 / the dtype's minimum, in the scores' ``dtype``, added to the
    scores (eager path)."""
    return None if keep is None else rt.where(keep, 0.0, mask_min(dtype)).to(dtype)


def build_mask(attention_mask, length: int, device, causal: bool, implementation: str, dtype=rt.float32):
    """What ``attention`` takes as ``mask`` for this implementation: additive in the scores'
    ``dtype`` (eager), boolean (sdpa), or None (nothing masked; or sdpa, causal, no padding:
    the op's ``is_causal`` flag does it)."""
    if implementation == "sdpa":
        if causal and attention_mask is None:
            return None
        return keep_mask(attention_mask, length, device, causal)
    return additive_mask(keep_mask(attention_mask, length, device, causal), dtype)


def decoder_mask(attention_mask, queries: int, past: int, keys: int, key_offset: int, device,
                 implementation: str, dtype=rt.float32, window: int | None = None) -> tuple:
    """(mask, is_causal) for ``queries`` new tokens at positions past, past+1, ... attending to
    ``keys`` keys at positions key_offset, key_offset+1, ... (the cached ones, then the new).

    Query p sees key j when j <= p, and with a sliding ``window`` also j > p - window.
    ``attention_mask`` (B, past + queries), 1 for tokens and 0 for padding, hides padded keys.
    sdpa needs no mask where its ``is_causal`` flag says it all (no cache, no padding, no
    window cut) or where every key is visible (one new token, no padding, no window cut);
    the eager path always adds one, as transformers' does.
    """
    q_pos = rt.arange(past, past + queries, device=device).reshape(queries, 1)
    k_pos = rt.arange(key_offset, key_offset + keys, device=device).reshape(1, keys)
    keep = k_pos <= q_pos
    cut = window is not None and past + queries - key_offset > window
    if cut:
        keep = rt.logical_and(keep, k_pos > q_pos - window)
    if attention_mask is not None:
        pad = attention_mask[:, key_offset:key_offset + keys] != 0
        keep = rt.logical_and(keep, pad.reshape(pad.shape[0], 1, 1, keys))
    if implementation == "sdpa" and attention_mask is None and not cut:
        if queries == keys:
            return None, True
        if queries == 1:
            return None, False
    if implementation == "sdpa":
        return keep, False
    return additive_mask(keep, dtype), False


# --- attention --------------------------------------------------------------------------------

def attention(q, k, v, mask, *, scaling: float, implementation: str = "eager", causal: bool = False,
              kv_groups: int = 1, dropout_p: float = 0.0, training: bool = False):
    """Softmax attention of q (B, H, Lq, D) over k, v (B, H / kv_groups, Lk, D) -> (B, H, Lq, Dv).

    ``mask`` comes from ``build_mask`` for the same implementation. With ``kv_groups`` > 1
    (grouped-query attention) the eager path repeats each key/value head for its group, as
    transformers does; sdpa lets the op share them (``enable_gqa``). The MACs are the same.
    """
    dropout_p = dropout_p if training else 0.0
    if check_implementation(implementation) == "sdpa":
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p,
                                              is_causal=causal and mask is None, scale=scaling,
                                              enable_gqa=kv_groups > 1)
    k, v = repeat_kv(k, kv_groups), repeat_kv(v, kv_groups)
    scores = rt.matmul(q, k.transpose(-2, -1)) * scaling
    if mask is not None:
        if mask.dtype is not scores.dtype:  # a float32 mask on bfloat16 scores: in their dtype, as transformers
            mask = mask.to(scores.dtype)
        scores = scores + mask
    weights = F.softmax(scores, dim=-1)
    if dropout_p > 0:
        weights = F.dropout(weights, p=dropout_p, training=True)
    return rt.matmul(weights, v)


# --- initialization ---------------------------------------------------------------------------

@contextlib.contextmanager
def skeleton() -> Iterator:
    """Build a model's layers on meta, so their own default initialization draws nothing that
    ``init_weights`` would overwrite; yields the device the weights belong on (see ``materialize``)."""
    device = rt.empty(0).device  # where factories create tensors right now
    with rt.meta():
        yield device


def materialize(model: nn.Module, device) -> None:
    """Give a model built by ``skeleton`` uninitialized storage on ``device`` and refill its
    derived buffers (modules that own some define ``reset_buffers``). Nothing to do on meta."""
    if device.type == "meta":
        return
    model.to_empty(device)
    for module in model.modules():
        if hasattr(module, "reset_buffers"):
            module.reset_buffers()


def init_weights(model: nn.Module, std: float) -> None:
    """transformers' ``PreTrainedModel._init_weights`` over every submodule: Linear and Embedding
    weights N(0, std), biases and the padding row zero, norms weight one and bias zero."""
    for module in model.modules():
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, 0.0, std)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, 0.0, std)
            zero_padding_row(module)
        elif isinstance(module, (nn.LayerNorm, nn.RMSNorm)):
            if getattr(module, "weight", None) is not None:
                nn.init.ones_(module.weight)
            if getattr(module, "bias", None) is not None:
                nn.init.zeros_(module.bias)


def zero_padding_row(embedding: nn.Module) -> None:
    """The padding token's vector starts at zero (as torch's Embedding does)."""
    idx = embedding.padding_idx
    if idx is not None and embedding.weight.data is not None:
        embedding.weight.data[idx] = 0  # a one-row write at init time, not a computation


def residual_std(std: float, n_layer: int) -> float:
    """GPT-2's scaled init of the projections that write into the residual stream."""
    return std / math.sqrt(2 * n_layer)
