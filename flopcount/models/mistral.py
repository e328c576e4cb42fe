"""Mistral decoders as Hugging Face transformers' ``MistralForCausalLM``: the Llama decoder
(``_decoder.py``) without biases, with grouped-query attention over a sliding window.

Every layer attends to the last ``sliding_window`` positions (query p sees keys p - window + 1
.. p), and its cache keeps only the last ``sliding_window - 1`` tokens, as transformers'
sliding-window cache layers do: past the window, a decode step reads a cache of constant size.

Presets: ``mistral`` (small, 2 layers, window 16, for tests) and ``mistral_7b`` (Mistral 7B v0.1;
build it on meta).
"""

from __future__ import annotations

from dataclasses import dataclass

from ._decoder import DecoderConfig, family_classes, register_presets

__all__ = ["MistralConfig", "MistralForCausalLM", "MistralModel", "mistral", "mistral_7b"]


@dataclass
class MistralConfig(DecoderConfig):
    """transformers' ``MistralConfig`` fields (defaults: Mistral 7B v0.1)."""

    intermediate_size: int = 14336
    num_key_value_heads: int | None = 8
    max_position_embeddings: int = 4096 * 32
    sliding_window: int | None = 4096


MistralRotaryEmbedding, MistralMLP, MistralAttention, MistralDecoderLayer, MistralModel, MistralForCausalLM = \
    family_classes("Mistral", MistralConfig)


PRESETS = {
    "mistral": ("small Mistral-style decoder (2 layers, hidden 256, GQA 8/2, sliding window 16)", 17_769_728,
                dict(vocab_size=32000, hidden_size=256, intermediate_size=688, num_hidden_layers=2,
                     num_attention_heads=8, num_key_value_heads=2, sliding_window=16)),
    "mistral_7b": ("Mistral 7B v0.1, GQA 32/8, sliding window 4096 (build it on meta)", 7_241_732_096,
                   dict(vocab_size=32000, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                        num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=32768,
                        rms_norm_eps=1e-5, sliding_window=4096)),
}

_factories = register_presets(PRESETS, MistralConfig, MistralForCausalLM, "mistral")
mistral, mistral_7b = _factories["mistral"], _factories["mistral_7b"]
