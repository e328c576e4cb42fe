"""Qwen2 decoders as Hugging Face transformers' ``Qwen2ForCausalLM``: the Llama decoder
(``_decoder.py``) with biases on the q, k and v projections (none on o).

With ``use_sliding_window`` the layers from ``max_window_layers`` on attend over a sliding
window (``layer_types`` lists each layer's kind, as transformers derives it); released Qwen2
checkpoints leave it off.

Presets: ``qwen2`` (small, 2 layers, for tests) and ``qwen2_7b`` (Qwen2-7B; build it on meta).
"""

from __future__ import annotations

from dataclasses import dataclass

from ._decoder import DecoderAttention, DecoderConfig, family_classes, register_presets

__all__ = ["Qwen2Config", "Qwen2ForCausalLM", "Qwen2Model", "qwen2", "qwen2_7b"]

LAYER_TYPES = ("full_attention", "sliding_attention")


@dataclass
class Qwen2Config(DecoderConfig):
    """transformers' ``Qwen2Config`` fields (defaults as there)."""

    vocab_size: int = 151936
    intermediate_size: int = 22016
    num_key_value_heads: int | None = 32
    max_position_embeddings: int = 32768
    use_sliding_window: bool = False
    sliding_window: int | None = 4096
    max_window_layers: int = 28
    layer_types: list | None = None

    def __post_init__(self):
        super().__post_init__()
        self.sliding_window = self.sliding_window if self.use_sliding_window else None
        if self.layer_types is None:
            self.layer_types = ["sliding_attention" if self.sliding_window is not None and i >= self.max_window_layers
                                else "full_attention" for i in range(self.num_hidden_layers)]
        unknown = sorted(set(self.layer_types) - set(LAYER_TYPES))
        if unknown or len(self.layer_types) != self.num_hidden_layers:
            raise ValueError(f"Qwen2Config: layer_types must give one of {list(LAYER_TYPES)} per layer "
                             f"({self.num_hidden_layers}), got {self.layer_types}")

    def layer_window(self, layer_idx: int) -> int | None:
        return self.sliding_window if self.layer_types[layer_idx] == "sliding_attention" else None


class Qwen2Attention(DecoderAttention):
    def biases(self, config) -> tuple[bool, bool]:
        return True, False


Qwen2RotaryEmbedding, Qwen2MLP, _, Qwen2DecoderLayer, Qwen2Model, Qwen2ForCausalLM = \
    family_classes("Qwen2", Qwen2Config, attention=Qwen2Attention)


PRESETS = {
    "qwen2": ("small Qwen2-style decoder (2 layers, hidden 256, GQA 8/2, qkv biases)", 17_770_496,
              dict(vocab_size=32000, hidden_size=256, intermediate_size=688, num_hidden_layers=2,
                   num_attention_heads=8, num_key_value_heads=2)),
    "qwen2_7b": ("Qwen2-7B, GQA 28/4 (build it on meta)", 7_615_616_512,
                 dict(vocab_size=152064, hidden_size=3584, intermediate_size=18944, num_hidden_layers=28,
                      num_attention_heads=28, num_key_value_heads=4, max_position_embeddings=131072,
                      rope_theta=1000000.0, sliding_window=131072, max_window_layers=28)),
}

_factories = register_presets(PRESETS, Qwen2Config, Qwen2ForCausalLM, "qwen2")
qwen2, qwen2_7b = _factories["qwen2"], _factories["qwen2_7b"]
