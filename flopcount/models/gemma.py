"""Gemma decoders as Hugging Face transformers' ``GemmaForCausalLM``: the Llama decoder
(``_decoder.py``) with Gemma's three differences.

* ``GemmaRMSNorm`` scales by ``1 + weight`` (the weight starts at zero) and normalizes in float32.
* The token embedding is multiplied by sqrt(hidden_size) (``GemmaTextScaledWordEmbedding``), in
  the weights' dtype, and ``lm_head`` is tied to it.
* The MLP's gate is GELU in its tanh form (``gelu_pytorch_tanh``; configs that say ``gelu`` mean
  it too, as transformers reads them), and heads are 256 wide whatever the hidden size.

Presets: ``gemma`` (small, 2 layers, for tests) and ``gemma_7b`` (Gemma 7B, 8.5B parameters with
its 256,000-token embedding; build it on meta).
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import runtime as rt
from ..runtime import nn
from ..runtime.nn import functional as F
from ._decoder import DecoderConfig, family_classes, register_presets

__all__ = ["GemmaConfig", "GemmaForCausalLM", "GemmaModel", "GemmaRMSNorm", "GemmaTextScaledWordEmbedding",
           "gemma", "gemma_7b"]


@dataclass
class GemmaConfig(DecoderConfig):
    """transformers' ``GemmaConfig`` fields (defaults: Gemma 7B)."""

    vocab_size: int = 256000
    hidden_size: int = 3072
    intermediate_size: int = 24576
    num_hidden_layers: int = 28
    num_attention_heads: int = 16
    num_key_value_heads: int | None = 16
    head_dim: int | None = 256
    hidden_act: str = "gelu_pytorch_tanh"
    max_position_embeddings: int = 8192
    pad_token_id: int | None = 0
    tie_word_embeddings: bool = True
    attention_bias: bool = False

    def __post_init__(self):
        if self.hidden_act == "gelu":  # Gemma's released configs say "gelu" and mean the tanh form
            self.hidden_act = "gelu_pytorch_tanh"
        super().__post_init__()


class GemmaRMSNorm(nn.Module):
    """x / sqrt(mean(x²) + eps) · (1 + weight), computed in float32 and returned in x's dtype."""

    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(rt.zeros(dim))

    def forward(self, x):
        normed = F.rms_norm(x.float(), (x.shape[-1],), None, self.eps)
        return (normed * (1.0 + self.weight.float())).to(x.dtype)

    def init_own_weights(self, std: float) -> None:
        nn.init.zeros_(self.weight)  # as transformers' GemmaPreTrainedModel._init_weights

    def extra_repr(self) -> str:
        return f"{tuple(self.weight.shape)}, eps={self.eps}"


class GemmaTextScaledWordEmbedding(nn.Embedding):
    """Token vectors times ``embed_scale`` (sqrt(hidden_size)), cast to the weights' dtype first."""

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx: int | None, embed_scale: float = 1.0):
        super().__init__(num_embeddings, embedding_dim, padding_idx=padding_idx)
        self.scalar_embed_scale = embed_scale
        self.register_buffer("embed_scale", rt.tensor(embed_scale, dtype=rt.float32), persistent=False)

    def reset_buffers(self) -> None:
        self.embed_scale.copy_(rt.tensor(self.scalar_embed_scale, dtype=rt.float32))

    def forward(self, input_ids):
        return super().forward(input_ids) * self.embed_scale.to(self.weight.dtype)


def _scaled_embedding(config: GemmaConfig) -> GemmaTextScaledWordEmbedding:
    return GemmaTextScaledWordEmbedding(config.vocab_size, config.hidden_size, config.pad_token_id,
                                        embed_scale=config.hidden_size ** 0.5)


GemmaRotaryEmbedding, GemmaMLP, GemmaAttention, GemmaDecoderLayer, GemmaModel, GemmaForCausalLM = \
    family_classes("Gemma", GemmaConfig, norm=GemmaRMSNorm, embedding=_scaled_embedding)


PRESETS = {
    "gemma": ("small Gemma-style decoder (2 layers, hidden 256, 4 heads of 64, tied head)", 10_093_824,
              dict(vocab_size=32000, hidden_size=256, intermediate_size=1024, num_hidden_layers=2,
                   num_attention_heads=4, num_key_value_heads=1, head_dim=64)),
    "gemma_7b": ("Gemma 7B: 16 heads of 256, 256k vocabulary, tied head (build it on meta)", 8_537_680_896,
                 dict(vocab_size=256000, hidden_size=3072, intermediate_size=24576, num_hidden_layers=28,
                      num_attention_heads=16, num_key_value_heads=16, head_dim=256, max_position_embeddings=8192)),
}

_factories = register_presets(PRESETS, GemmaConfig, GemmaForCausalLM, "gemma")
gemma, gemma_7b = _factories["gemma"], _factories["gemma_7b"]
