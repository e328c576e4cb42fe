"""Phi-3 decoders as Hugging Face transformers' ``Phi3ForCausalLM``: the Llama decoder
(``_decoder.py``) with fused projections and an optional sliding window.

* ``self_attn.qkv_proj`` is one linear layer producing q, then k, then v (sliced apart), and
  ``mlp.gate_up_proj`` one producing the gate then the up projection (``chunk(2)``); the MACs
  equal the separate projections', in half the kernels.
* Residual dropouts (``resid_attn_dropout``, ``resid_mlp_dropout``) after each sublayer.
* ``partial_rotary_factor`` in ``rope_parameters`` rotates only that share of each head.

Presets: ``phi3`` (small, 2 layers, for tests) and ``phi3_mini`` (Phi-3-mini-4k-instruct: 3.8B,
sliding window 2047; build it on meta).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..runtime import nn
from ._decoder import DecoderAttention, DecoderConfig, DecoderLayer, family_classes, register_presets
from ._text import activation, split_heads

__all__ = ["Phi3Config", "Phi3ForCausalLM", "Phi3Model", "phi3", "phi3_mini"]


@dataclass
class Phi3Config(DecoderConfig):
    """transformers' ``Phi3Config`` fields (defaults: Phi-3-mini-4k)."""

    vocab_size: int = 32064
    hidden_size: int = 3072
    intermediate_size: int = 8192
    max_position_embeddings: int = 4096
    original_max_position_embeddings: int = 4096
    rms_norm_eps: float = 1e-5
    resid_pdrop: float = 0.0
    embd_pdrop: float = 0.0
    pad_token_id: int | None = 32000
    sliding_window: int | None = None


class Phi3MLP(nn.Module):
    """down_proj(up * act(gate)), gate and up from one ``gate_up_proj``."""

    def __init__(self, config: Phi3Config):
        super().__init__()
        self.gate_up_proj = nn.Linear(config.hidden_size, 2 * config.intermediate_size, bias=False)
        self.down_proj = nn.Linear(config.intermediate_size, config.hidden_size, bias=False)
        self.activation_fn = activation(config.hidden_act)

    def forward(self, hidden_states):
        gate, up = self.gate_up_proj(hidden_states).chunk(2, dim=-1)
        return self.down_proj(up * self.activation_fn(gate))


class Phi3Attention(DecoderAttention):
    """q, k and v from one ``qkv_proj`` (no biases), then the shared attention."""

    def make_projections(self, config) -> None:
        heads, kv_heads, d = config.num_attention_heads, config.num_key_value_heads, self.head_dim
        self.o_proj = nn.Linear(heads * d, config.hidden_size, bias=False)
        self.qkv_proj = nn.Linear(config.hidden_size, (heads + 2 * kv_heads) * d, bias=False)

    def project(self, hidden_states) -> tuple:
        q_size = self.config.num_attention_heads * self.head_dim
        kv_size = self.num_key_value_heads * self.head_dim
        q, k, v = self.qkv_proj(hidden_states).split([q_size, kv_size, kv_size], dim=-1)
        return tuple(split_heads(t, self.head_dim) for t in (q, k, v))


class Phi3DecoderLayer(DecoderLayer):
    """The pre-norm block with a dropout on each sublayer's output before the residual add."""

    attention_class = Phi3Attention
    mlp_class = Phi3MLP

    def __init__(self, config: Phi3Config, layer_idx: int):
        super().__init__(config, layer_idx)
        self.resid_attn_dropout = nn.Dropout(config.resid_pdrop)
        self.resid_mlp_dropout = nn.Dropout(config.resid_pdrop)

    def forward(self, hidden_states, position_embeddings, attention_mask, past_key_values=None):
        attended = self.self_attn(self.input_layernorm(hidden_states), position_embeddings, attention_mask,
                                  past_key_values)
        hidden_states = hidden_states + self.resid_attn_dropout(attended)
        return hidden_states + self.resid_mlp_dropout(self.mlp(self.post_attention_layernorm(hidden_states)))


Phi3RotaryEmbedding, _, _, _, Phi3Model, Phi3ForCausalLM = family_classes("Phi3", Phi3Config, layer=Phi3DecoderLayer)


PRESETS = {
    "phi3": ("small Phi-3-style decoder (2 layers, hidden 256, fused qkv and gate_up, sliding window 16)",
             17_802_496, dict(vocab_size=32064, hidden_size=256, intermediate_size=688, num_hidden_layers=2,
                              num_attention_heads=8, num_key_value_heads=2, sliding_window=16)),
    "phi3_mini": ("Phi-3-mini-4k: 3.8B, 32 heads, sliding window 2047 (build it on meta)", 3_821_079_552,
                  dict(vocab_size=32064, hidden_size=3072, intermediate_size=8192, num_hidden_layers=32,
                       num_attention_heads=32, num_key_value_heads=32, max_position_embeddings=4096,
                       sliding_window=2047, pad_token_id=32000)),
}

_factories = register_presets(PRESETS, Phi3Config, Phi3ForCausalLM, "phi3")
phi3, phi3_mini = _factories["phi3"], _factories["phi3_mini"]
