"""The decoder-only transformer that Llama, Mistral, Qwen2, Gemma, Phi-3 and Mixtral share, as
Hugging Face transformers writes it (``LlamaModel`` and the models its modular files derive).

Pre-norm blocks ``x + self_attn(input_layernorm(x))`` then ``x + mlp(post_attention_layernorm(x))``,
rotary position embeddings on q and k, grouped-query attention (``num_key_value_heads`` key/value
heads, each shared by a group of query heads), a final norm and an untied or tied ``lm_head``.
Module paths are transformers' (``model.embed_tokens``, ``model.layers.{i}.self_attn.q_proj``,
``...mlp.gate_proj``, ``...input_layernorm``, ``model.norm``, ``lm_head``). A family file
subclasses these classes under its own names and changes what differs (the attention's biases or
fused projection, the MLP, the norm, the embedding, which layers slide).

The causal LM takes and returns a KV cache as transformers does (``_cache.py``):

    forward(input_ids, attention_mask=None, position_ids=None, past_key_values=None, use_cache=None)

returns the logits (B, L, vocab) when no cache is in play, else a ``CausalLMOutputWithPast`` with
``logits`` and ``past_key_values``. ``use_cache`` defaults to "a cache was given"; the new tokens'
positions follow the cache's length. So a decode step is one more forward, traced like any other.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from .. import runtime as rt
from ..runtime import nn
from ._cache import CacheLayout, CausalLMOutputWithPast, as_cache
from ._registry import register_model, token_input
from ._text import (activation, attention, check_heads, config_from, decoder_mask, init_weights,
                    materialize, merge_heads, skeleton, split_heads, SwitchableAttention)

ROPE_TYPES = ("default", "linear", "llama3", "yarn")


@dataclass
class DecoderConfig:
    """The fields every family's transformers config has (defaults: Llama 2 7B's).

    Rotary embeddings take ``rope_theta`` and ``rope_scaling`` as checkpoints' ``config.json``
    files write them, or transformers' newer ``rope_parameters`` dict, which wins when given;
    rope types ``default``, ``linear`` and ``llama3`` are supported.
    """

    vocab_size: int = 32000
    hidden_size: int = 4096
    intermediate_size: int = 11008
    num_hidden_layers: int = 32
    num_attention_heads: int = 32
    num_key_value_heads: int | None = None
    head_dim: int | None = None
    hidden_act: str = "silu"
    max_position_embeddings: int = 2048
    initializer_range: float = 0.02
    rms_norm_eps: float = 1e-6
    pad_token_id: int | None = None
    tie_word_embeddings: bool = False
    rope_theta: float = 10000.0
    rope_scaling: dict | None = None
    rope_parameters: dict | None = None
    attention_dropout: float = 0.0
    attn_implementation: str = "eager"

    def __post_init__(self):
        if self.num_key_value_heads is None:
            self.num_key_value_heads = self.num_attention_heads
        if self.head_dim is None:
            self.head_dim = self.hidden_size // self.num_attention_heads
        check_heads(self, "num_attention_heads", "num_key_value_heads")
        rope = self.rope()
        if rope.get("rope_type", "default") not in ROPE_TYPES:
            raise ValueError(f"{type(self).__name__}: rope type {rope['rope_type']!r} is not supported; "
                             f"known: {list(ROPE_TYPES)}")

    def rope(self) -> dict:
        """The rotary parameters: ``rope_parameters``, else ``rope_theta`` with ``rope_scaling``."""
        if self.rope_parameters is not None:
            return {"rope_theta": self.rope_theta, **self.rope_parameters}
        rope = dict(self.rope_scaling or {})
        if "type" in rope:  # older config.json files name the type "type"
            rope.setdefault("rope_type", rope.pop("type"))
        return {"rope_theta": self.rope_theta, **rope}

    def layer_window(self, layer_idx: int) -> int | None:
        """Layer ``layer_idx``'s sliding attention window (None: it attends to every earlier token):
        a family whose config has a ``sliding_window`` field slides every layer by it."""
        return getattr(self, "sliding_window", None)


# --- rotary position embeddings ----------------------------------------------------------------

def rope_inv_freq(config: DecoderConfig) -> np.ndarray:
    """θ^(-2i/d) for the rotated dims d = head_dim · partial_rotary_factor, scaled as the rope type
    says (transformers' ``ROPE_INIT_FUNCTIONS``: "linear" divides by ``factor``; "llama3" divides
    the long wavelengths by ``factor`` and blends the middle ones)."""
    rope = config.rope()
    dim = int(config.head_dim * rope.get("partial_rotary_factor", 1.0))
    exponents = np.arange(0, dim, 2, dtype=np.int64).astype(np.float32) / dim
    inv_freq = (1.0 / (rope["rope_theta"] ** exponents)).astype(np.float32)
    kind = rope.get("rope_type", "default")
    if kind == "linear":
        inv_freq = inv_freq / rope["factor"]
    elif kind == "llama3":
        factor, low, high = rope["factor"], rope["low_freq_factor"], rope["high_freq_factor"]
        old_context = rope["original_max_position_embeddings"]
        wavelen = 2 * math.pi / inv_freq
        scaled = np.where(wavelen > old_context / low, inv_freq / factor, inv_freq)
        smooth = (old_context / wavelen - low) / (high - low)
        blended = (1 - smooth) * scaled / factor + smooth * scaled
        medium = (wavelen >= old_context / high) & (wavelen <= old_context / low)
        inv_freq = np.where(medium, blended, scaled).astype(np.float32)
    elif kind == "yarn":
        inv_freq = _yarn_inv_freq(inv_freq, dim, rope, config)
    return inv_freq


def _yarn_inv_freq(inv_freq: np.ndarray, dim: int, rope: dict, config) -> np.ndarray:
    """YaRN (transformers' ``_compute_yarn_parameters``): the frequencies that turn fewer than
    ``beta_slow`` times over the original context are interpolated (divided by ``factor``), those
    that turn more than ``beta_fast`` times extrapolated (kept), a linear ramp between."""
    base, factor = rope["rope_theta"], _yarn_factor(rope, config)
    original = rope["original_max_position_embeddings"]
    beta_fast, beta_slow = rope.get("beta_fast") or 32, rope.get("beta_slow") or 1

    def correction_dim(rotations):
        return dim * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(base))

    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    if rope.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    ramp = np.clip((np.arange(dim // 2, dtype=np.float32) - low) / (high - low), 0, 1).astype(np.float32)
    extrapolated = 1 - ramp
    return (inv_freq / factor * (1 - extrapolated) + inv_freq * extrapolated).astype(np.float32)


def _yarn_factor(rope: dict, config) -> float:
    factor = rope.get("factor")
    return factor if factor is not None else config.max_position_embeddings / rope["original_max_position_embeddings"]


def rope_attention_factor(config: DecoderConfig) -> float:
    """The factor the rope type scales cos and sin by: YaRN's ``attention_factor`` (from ``factor``,
    ``mscale`` and ``mscale_all_dim`` when not given), 1 otherwise."""
    rope = config.rope()
    if rope.get("rope_type", "default") != "yarn":
        return 1.0
    if rope.get("attention_factor") is not None:
        return float(rope["attention_factor"])
    factor = _yarn_factor(rope, config)
    if rope.get("mscale") and rope.get("mscale_all_dim"):
        return float(yarn_mscale(factor, rope["mscale"]) / yarn_mscale(factor, rope["mscale_all_dim"]))
    return yarn_mscale(factor)


def yarn_mscale(scale: float, mscale: float = 1.0) -> float:
    """YaRN's attention scale for a context stretched ``scale`` times: 0.1·mscale·ln(scale) + 1."""
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


class RotaryEmbedding(nn.Module):
    """cos and sin of position·inv_freq (``rope_inv_freq``), for the rotated part of each head."""

    def __init__(self, config: DecoderConfig):
        super().__init__()
        self.config = config
        # Derived from the config, so not state (non-persistent, as in transformers).
        self.register_buffer("inv_freq", rt.tensor(rope_inv_freq(config)), persistent=False)

    def reset_buffers(self) -> None:
        self.inv_freq.copy_(rt.tensor(rope_inv_freq(self.config)))

    def forward(self, x, position_ids):
        """position_ids (B, L) -> cos, sin of shape (B, L, rotated dims), in x's dtype, scaled by
        the rope type's attention factor (YaRN's; 1 for the others)."""
        freqs = position_ids.unsqueeze(-1).float() * self.inv_freq.float()
        emb = rt.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos(), emb.sin()
        factor = rope_attention_factor(self.config)
        if factor != 1.0:
            cos, sin = cos * factor, sin * factor
        return cos.to(x.dtype), sin.to(x.dtype)


def rotate_half(x):
    """(x1, x2) -> (-x2, x1) over the two halves of the last dim."""
    half = x.shape[-1] // 2
    return rt.cat((-x[..., half:], x[..., :half]), dim=-1)


def apply_rotary_pos_emb(q, k, cos, sin):
    """Rotate q and k (B, H, L, D) by the position angles; cos and sin are (B, L, R). With R < D
    (a partial rotary factor) only the first R dims turn, the rest pass through."""
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    rotated = cos.shape[-1]
    if rotated == q.shape[-1]:
        return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin

    def turn(x):
        part, rest = x[..., :rotated], x[..., rotated:]
        return rt.cat((part * cos + rotate_half(part) * sin, rest), dim=-1)

    return turn(q), turn(k)


# --- blocks --------------------------------------------------------------------------------------

class LayerMask(NamedTuple):
    """A layer's attention mask as ``_text.attention`` takes it, and whether sdpa's own causal flag
    does the masking."""

    mask: object
    is_causal: bool


class GatedMLP(nn.Module):
    """SwiGLU (GeGLU with a GELU): down_proj(act(gate_proj(x)) * up_proj(x))."""

    def __init__(self, config: DecoderConfig):
        super().__init__()
        bias = getattr(config, "mlp_bias", False)
        self.gate_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=bias)
        self.up_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=bias)
        self.down_proj = nn.Linear(config.intermediate_size, config.hidden_size, bias=bias)
        self.act_fn = activation(config.hidden_act)

    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class DecoderAttention(nn.Module):
    """Causal grouped-query attention with rotary q and k; separate q/k/v projections whose
    biases ``biases`` gives (Llama: ``attention_bias`` for all four)."""

    def __init__(self, config: DecoderConfig, layer_idx: int):
        super().__init__()
        self.layer_idx = layer_idx
        self.head_dim = config.head_dim
        self.num_key_value_heads = config.num_key_value_heads
        self.num_key_value_groups = config.num_attention_heads // config.num_key_value_heads
        self.scaling = self.head_dim ** -0.5
        self.attention_dropout = config.attention_dropout
        self.sliding_window = config.layer_window(layer_idx)
        self.config = config  # shared: config.attn_implementation switches every layer at once
        self.make_projections(config)

    def biases(self, config) -> tuple[bool, bool]:
        """(bias on q, k and v, bias on o)."""
        bias = getattr(config, "attention_bias", False)
        return bias, bias

    def make_projections(self, config) -> None:
        qkv_bias, o_bias = self.biases(config)
        heads, kv_heads, d = config.num_attention_heads, config.num_key_value_heads, self.head_dim
        self.q_proj = nn.Linear(config.hidden_size, heads * d, bias=qkv_bias)
        self.k_proj = nn.Linear(config.hidden_size, kv_heads * d, bias=qkv_bias)
        self.v_proj = nn.Linear(config.hidden_size, kv_heads * d, bias=qkv_bias)
        self.o_proj = nn.Linear(heads * d, config.hidden_size, bias=o_bias)

    def project(self, hidden_states) -> tuple:
        """q (B, H, L, D), k and v (B, H_kv, L, D)."""
        return tuple(split_heads(proj(hidden_states), self.head_dim) for proj in (self.q_proj, self.k_proj, self.v_proj))

    def forward(self, hidden_states, position_embeddings, attention_mask: LayerMask, past_key_values=None):
        q, k, v = self.project(hidden_states)
        q, k = apply_rotary_pos_emb(q, k, *position_embeddings)
        if past_key_values is not None:
            k, v = past_key_values.update(k, v, self.layer_idx)
        out = attention(q, k, v, attention_mask.mask, scaling=self.scaling,
                        implementation=self.config.attn_implementation, causal=attention_mask.is_causal,
                        kv_groups=self.num_key_value_groups, dropout_p=self.attention_dropout,
                        training=self.training)
        return self.o_proj(merge_heads(out))


class DecoderLayer(nn.Module):
    """x + self_attn(input_layernorm(x)), then x + mlp(post_attention_layernorm(x))."""

    attention_class = DecoderAttention
    mlp_class = GatedMLP
    norm_class = nn.RMSNorm

    def __init__(self, config: DecoderConfig, layer_idx: int):
        super().__init__()
        self.self_attn = self.attention_class(config, layer_idx)
        self.mlp = self.mlp_class(config)
        self.input_layernorm = self.norm_class(config.hidden_size, eps=config.rms_norm_eps)
        self.post_attention_layernorm = self.norm_class(config.hidden_size, eps=config.rms_norm_eps)

    def forward(self, hidden_states, position_embeddings, attention_mask: LayerMask, past_key_values=None):
        attended = self.self_attn(self.input_layernorm(hidden_states), position_embeddings, attention_mask,
                                  past_key_values)
        hidden_states = hidden_states + attended
        return hidden_states + self.mlp(self.post_attention_layernorm(hidden_states))


class DecoderModel(nn.Module):
    """Token embedding, decoder layers, final norm; ``forward`` returns the last hidden state and
    grows the DynamicCache it is given (plain (keys, values) pairs are wrapped in a new one)."""

    layer_class = DecoderLayer
    norm_class = nn.RMSNorm
    rotary_class = RotaryEmbedding

    def __init__(self, config: DecoderConfig):
        super().__init__()
        self.config = config
        self.embed_tokens = self.make_embedding(config)
        self.layers = nn.ModuleList([self.layer_class(config, i) for i in range(config.num_hidden_layers)])
        self.norm = self.norm_class(config.hidden_size, eps=config.rms_norm_eps)
        self.rotary_emb = self.rotary_class(config)

    def make_embedding(self, config) -> nn.Module:
        return nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id)

    def sliding_windows(self) -> list:
        """Each layer's sliding window (None where it attends to everything): the cache's shape."""
        return [self.config.layer_window(i) for i in range(self.config.num_hidden_layers)]

    def forward(self, input_ids, attention_mask=None, position_ids=None, past_key_values=None):
        hidden = self.embed_tokens(input_ids)
        cache = None if past_key_values is None else as_cache(past_key_values, self.sliding_windows())
        queries = input_ids.shape[1]
        past = cache.get_seq_length() if cache is not None else 0
        if position_ids is None:
            position_ids = rt.arange(past, past + queries, device=input_ids.device).unsqueeze(0)
        position_embeddings = self.rotary_emb(hidden, position_ids)
        masks: dict = {}  # layers that read the same keys share one mask
        for i, layer in enumerate(self.layers):
            keys, offset = cache.get_mask_sizes(queries, i) if cache is not None else (queries, 0)
            window = layer.self_attn.sliding_window
            if (keys, offset, window) not in masks:
                masks[keys, offset, window] = LayerMask(*decoder_mask(
                    attention_mask, queries, past, keys, offset, hidden.device, self.config.attn_implementation,
                    hidden.dtype, window))
            hidden = layer(hidden, position_embeddings, masks[keys, offset, window], cache)
        return self.norm(hidden)


class DecoderForCausalLM(nn.Module, SwitchableAttention):
    """The decoder and its ``lm_head``; see the module docstring for ``forward``.

    ``attention_mask`` is (B, cached + new tokens), 1 for tokens and 0 for padding.
    """

    config_class = DecoderConfig
    model_class = DecoderModel

    def __init__(self, config: DecoderConfig | None = None):
        super().__init__()
        self.config = config or self.config_class()
        with skeleton() as device:
            self.model = self.model_class(self.config)
            self.lm_head = nn.Linear(self.config.hidden_size, self.config.vocab_size, bias=False)
        materialize(self, device)
        init_weights(self, self.config.initializer_range)
        for module in self.modules():  # what transformers' _init_weights does beyond Linear, Embedding, norms
            if hasattr(module, "init_own_weights"):
                module.init_own_weights(self.config.initializer_range)
        if self.config.tie_word_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight

    def kv_cache_layout(self) -> list:
        """Each layer's cache: key/value heads, head dim, sliding window or None."""
        return [CacheLayout.heads(self.config.num_key_value_heads, self.config.head_dim, self.config.layer_window(i))
                for i in range(self.config.num_hidden_layers)]

    def forward(self, input_ids, attention_mask=None, position_ids=None, past_key_values=None, use_cache=None):
        if use_cache is None:
            use_cache = past_key_values is not None
        cache = as_cache(past_key_values, self.model.sliding_windows()) if use_cache or past_key_values is not None \
            else None
        logits = self.lm_head(self.model(input_ids, attention_mask, position_ids, cache))
        if not use_cache:
            return logits
        return CausalLMOutputWithPast(logits=logits, past_key_values=cache)


def family_classes(family: str, config_class, *, attention=None, mlp=None, layer=None, norm=None,
                   embedding=None) -> tuple:
    """A family's classes under transformers' names: ``{family}RotaryEmbedding``, ``{family}MLP``,
    ``{family}Attention``, ``{family}DecoderLayer``, ``{family}Model`` and ``{family}ForCausalLM``,
    in that order. Each is the shared class under the family's name (so module trees and reports
    name the family's classes, as transformers does), except ``attention``, ``mlp`` and ``layer``
    when given, used as they are. ``norm`` replaces RMSNorm in the layers and the final norm;
    ``embedding(config)`` makes the token embedding."""

    def named(base, suffix, **attrs):
        cls = type(base)(f"{family}{suffix}", (base,), {"__module__": config_class.__module__, **attrs})
        cls.__qualname__ = cls.__name__
        return cls

    norms = {} if norm is None else {"norm_class": norm}
    rotary = named(RotaryEmbedding, "RotaryEmbedding")
    if layer is None:
        attention = attention or named(DecoderAttention, "Attention")
        mlp = mlp or named(GatedMLP, "MLP")
        layer = named(DecoderLayer, "DecoderLayer", attention_class=attention, mlp_class=mlp, **norms)
    model_attrs = dict(norms, layer_class=layer, rotary_class=rotary)
    if embedding is not None:
        model_attrs["make_embedding"] = lambda self, config: embedding(config)
    model = named(DecoderModel, "Model", **model_attrs)
    causal_lm = named(DecoderForCausalLM, "ForCausalLM", config_class=config_class, model_class=model)
    return rotary, layer.mlp_class, layer.attention_class, layer, model, causal_lm


def register_presets(presets: dict, config_class, model_class, family: str, length: int = 128) -> dict:
    """Register every ``name: (description, published parameter count, config)`` of ``presets``
    as a zoo model building ``model_class(config_class(**config, **overrides))``; returns the
    factories by name."""
    return {name: _register(name, description, params, preset, config_class, model_class, family, length)
            for name, (description, params, preset) in presets.items()}


def _register(name, description, params, preset, config_class, model_class, family, length):
    def factory(**config):
        return model_class(config_from(config_class, {**preset, **config}))

    factory.__name__ = factory.__qualname__ = name
    factory.__doc__ = f"{description}; keyword arguments override ``{config_class.__name__}`` fields."
    return register_model(name, family=family, inputs=token_input(length, preset["vocab_size"]), params=params,
                          description=description, **preset)(factory)
