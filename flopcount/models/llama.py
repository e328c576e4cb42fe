"""Llama-style decoders as Hugging Face transformers' ``LlamaForCausalLM``.

Pre-norm blocks with RMSNorm, rotary position embeddings, grouped-query attention (``k_proj`` and
``v_proj`` produce ``num_key_value_heads`` heads, each shared by a group of query heads) and a
SwiGLU MLP ``down_proj(silu(gate_proj(x)) * up_proj(x))``. Paths are transformers'
(``model.embed_tokens``, ``model.layers.{i}.self_attn.q_proj``, ``...mlp.gate_proj``,
``...input_layernorm``, ``model.norm``, ``lm_head``).

Presets: ``llama`` (a small 2-layer model for quick runs), ``llama2_7b`` and ``llama3_8b``. Build
the large ones on the meta device, where nothing is allocated:

    >>> import flopcount.runtime as rt
    >>> from flopcount import models
    >>> with rt.meta():
    ...     net = models.get("llama2_7b")
    >>> net(models.example_input("llama2_7b", device="meta")).shape
    (1, 128, 32000)

Attention: ``attn_implementation="eager"`` (default) runs QKᵀ and PV as two ``matmul`` ops with
an additive causal mask; ``"sdpa"`` runs one ``scaled_dot_product_attention`` with
``is_causal=True`` (see _text.py). Either way the contractions count all H query heads: eager
repeats each key/value head for its group first (as transformers does), sdpa shares them
(``enable_gqa``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import runtime as rt
from ..runtime import nn
from ._registry import register_model, token_input
from ._text import (activation, attention, build_mask, check_implementation, config_from, init_weights,
                    materialize, merge_heads, skeleton, split_heads, SwitchableAttention)

__all__ = ["LlamaConfig", "LlamaForCausalLM", "LlamaModel", "llama", "llama2_7b", "llama3_8b"]


@dataclass
class LlamaConfig:
    """transformers' ``LlamaConfig`` fields (defaults: Llama 2 7B, except as registered below)."""

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
    attention_bias: bool = False
    attention_dropout: float = 0.0
    mlp_bias: bool = False
    attn_implementation: str = "eager"

    def __post_init__(self):
        check_implementation(self.attn_implementation)
        if self.num_key_value_heads is None:
            self.num_key_value_heads = self.num_attention_heads
        if self.head_dim is None:
            self.head_dim = self.hidden_size // self.num_attention_heads
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(f"LlamaConfig: num_attention_heads {self.num_attention_heads} is not a multiple "
                             f"of num_key_value_heads {self.num_key_value_heads}")


class LlamaRotaryEmbedding(nn.Module):
    """cos and sin of position·inv_freq, inv_freq = θ^(-2i/d) (the "default" rope type)."""

    def __init__(self, config: LlamaConfig):
        super().__init__()
        self.dim, self.rope_theta = config.head_dim, config.rope_theta
        # Derived from the config, so not state (non-persistent, as in transformers).
        self.register_buffer("inv_freq", rt.tensor(self._inv_freq()), persistent=False)

    def _inv_freq(self) -> np.ndarray:
        exponents = np.arange(0, self.dim, 2, dtype=np.int64).astype(np.float32) / self.dim
        return (1.0 / (self.rope_theta ** exponents)).astype(np.float32)

    def reset_buffers(self) -> None:
        self.inv_freq.copy_(rt.tensor(self._inv_freq()))

    def forward(self, x, position_ids):
        """position_ids (B, L) -> cos, sin of shape (B, L, head_dim), in x's dtype."""
        freqs = position_ids.unsqueeze(-1).float() * self.inv_freq
        emb = rt.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


def rotate_half(x):
    """(x1, x2) -> (-x2, x1) over the two halves of the last dim."""
    half = x.shape[-1] // 2
    return rt.cat((-x[..., half:], x[..., :half]), dim=-1)


def apply_rotary_pos_emb(q, k, cos, sin):
    """Rotate q and k (B, H, L, D) by the position angles; cos and sin are (B, L, D)."""
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


class LlamaMLP(nn.Module):
    """SwiGLU: down_proj(act(gate_proj(x)) * up_proj(x))."""

    def __init__(self, config: LlamaConfig):
        super().__init__()
        self.gate_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=config.mlp_bias)
        self.up_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=config.mlp_bias)
        self.down_proj = nn.Linear(config.intermediate_size, config.hidden_size, bias=config.mlp_bias)
        self.act_fn = activation(config.hidden_act)

    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class LlamaAttention(nn.Module):
    """Causal grouped-query attention with rotary embeddings on q and k."""

    def __init__(self, config: LlamaConfig, layer_idx: int):
        super().__init__()
        self.layer_idx = layer_idx
        self.head_dim = config.head_dim
        self.num_key_value_groups = config.num_attention_heads // config.num_key_value_heads
        self.scaling = self.head_dim ** -0.5
        self.attention_dropout = config.attention_dropout
        self.config = config  # shared: config.attn_implementation switches every layer at once
        heads, kv_heads, bias = config.num_attention_heads, config.num_key_value_heads, config.attention_bias
        self.q_proj = nn.Linear(config.hidden_size, heads * self.head_dim, bias=bias)
        self.k_proj = nn.Linear(config.hidden_size, kv_heads * self.head_dim, bias=bias)
        self.v_proj = nn.Linear(config.hidden_size, kv_heads * self.head_dim, bias=bias)
        self.o_proj = nn.Linear(heads * self.head_dim, config.hidden_size, bias=bias)

    def forward(self, hidden_states, position_embeddings, attention_mask=None):
        q = split_heads(self.q_proj(hidden_states), self.head_dim)
        k = split_heads(self.k_proj(hidden_states), self.head_dim)
        v = split_heads(self.v_proj(hidden_states), self.head_dim)
        q, k = apply_rotary_pos_emb(q, k, *position_embeddings)
        out = attention(q, k, v, attention_mask, scaling=self.scaling,
                        implementation=self.config.attn_implementation, causal=True,
                        kv_groups=self.num_key_value_groups, dropout_p=self.attention_dropout,
                        training=self.training)
        return self.o_proj(merge_heads(out))


class LlamaDecoderLayer(nn.Module):
    """x + self_attn(input_layernorm(x)), then x + mlp(post_attention_layernorm(x))."""

    def __init__(self, config: LlamaConfig, layer_idx: int):
        super().__init__()
        self.self_attn = LlamaAttention(config, layer_idx)
        self.mlp = LlamaMLP(config)
        self.input_layernorm = nn.RMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.post_attention_layernorm = nn.RMSNorm(config.hidden_size, eps=config.rms_norm_eps)

    def forward(self, hidden_states, position_embeddings, attention_mask=None):
        hidden_states = hidden_states + self.self_attn(self.input_layernorm(hidden_states), position_embeddings,
                                                       attention_mask)
        return hidden_states + self.mlp(self.post_attention_layernorm(hidden_states))


class LlamaModel(nn.Module):
    """Token embedding, decoder layers, final RMSNorm; returns the last hidden state."""

    def __init__(self, config: LlamaConfig):
        super().__init__()
        self.config = config
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id)
        self.layers = nn.ModuleList([LlamaDecoderLayer(config, i) for i in range(config.num_hidden_layers)])
        self.norm = nn.RMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.rotary_emb = LlamaRotaryEmbedding(config)

    def forward(self, input_ids, attention_mask=None, position_ids=None):
        length = input_ids.shape[1]
        hidden = self.embed_tokens(input_ids)
        if position_ids is None:
            position_ids = rt.arange(length, device=input_ids.device).unsqueeze(0)
        mask = build_mask(attention_mask, length, hidden.device, causal=True,
                          implementation=self.config.attn_implementation, dtype=hidden.dtype)
        position_embeddings = self.rotary_emb(hidden, position_ids)
        for layer in self.layers:
            hidden = layer(hidden, position_embeddings, mask)
        return self.norm(hidden)


class LlamaForCausalLM(nn.Module, SwitchableAttention):
    """``forward(input_ids, attention_mask=None, position_ids=None)`` -> logits (B, L, vocab_size).

    ``attention_mask`` is (B, L), 1 for tokens and 0 for padding.
    """

    def __init__(self, config: LlamaConfig | None = None):
        super().__init__()
        self.config = config or LlamaConfig()
        with skeleton() as device:
            self.model = LlamaModel(self.config)
            self.lm_head = nn.Linear(self.config.hidden_size, self.config.vocab_size, bias=False)
        materialize(self, device)
        init_weights(self, self.config.initializer_range)
        if self.config.tie_word_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight

    def forward(self, input_ids, attention_mask=None, position_ids=None):
        return self.lm_head(self.model(input_ids, attention_mask, position_ids))


# Presets as data: name -> (description, reference parameter count, config).
PRESETS = {
    # A small model for eager runs and tests: 2 layers, GQA with 8 query and 2 key/value heads.
    "llama": ("small Llama-style decoder (2 layers, hidden 256, GQA 8/2)", 17_769_728,
              dict(vocab_size=32000, hidden_size=256, intermediate_size=688, num_hidden_layers=2,
                   num_attention_heads=8, num_key_value_heads=2, max_position_embeddings=2048)),
    "llama2_7b": ("Llama 2 7B (build it on meta)", 6_738_415_616,
                  dict(vocab_size=32000, hidden_size=4096, intermediate_size=11008, num_hidden_layers=32,
                       num_attention_heads=32, num_key_value_heads=32, max_position_embeddings=4096,
                       rms_norm_eps=1e-5)),
    "llama3_8b": ("Llama 3 8B, GQA with 8 key/value heads (build it on meta)", 8_030_261_248,
                  dict(vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                       num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=8192,
                       rms_norm_eps=1e-5, rope_theta=500000.0)),
}


def _register(name: str):
    description, params, preset = PRESETS[name]

    def factory(**config) -> LlamaForCausalLM:
        return LlamaForCausalLM(config_from(LlamaConfig, {**preset, **config}))

    factory.__name__ = factory.__qualname__ = name
    factory.__doc__ = f"{description}; keyword arguments override ``LlamaConfig`` fields."
    inputs = token_input(128, preset["vocab_size"])
    return register_model(name, family="llama", inputs=inputs, params=params, description=description,
                          **preset)(factory)


llama = _register("llama")
llama2_7b = _register("llama2_7b")
llama3_8b = _register("llama3_8b")
