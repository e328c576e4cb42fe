"""Llama-style decoders as Hugging Face transformers' ``LlamaForCausalLM``.

Pre-norm blocks with RMSNorm, rotary position embeddings, grouped-query attention and a SwiGLU
MLP ``down_proj(silu(gate_proj(x)) * up_proj(x))`` (the shared decoder of ``_decoder.py``; here
``attention_bias`` and ``mlp_bias`` switch the projections' biases). Paths are transformers'
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

A decode step is a forward over the new token with the cache of the earlier ones:

    >>> net = models.get("llama").eval()
    >>> prompt = models.example_input("llama")[:, :8]
    >>> out = net(prompt, use_cache=True)
    >>> step = net(out.logits[:, -1:].argmax(-1), past_key_values=out.past_key_values)
    >>> step.logits.shape, step.past_key_values.get_seq_length()
    ((1, 1, 32000), 9)

Attention: ``attn_implementation="eager"`` (default) runs QKᵀ and PV as two ``matmul`` ops with
an additive causal mask; ``"sdpa"`` runs one ``scaled_dot_product_attention`` (see _text.py).
Either way the contractions count all H query heads: eager repeats each key/value head for its
group first (as transformers does), sdpa shares them (``enable_gqa``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ._decoder import DecoderConfig, apply_rotary_pos_emb, family_classes, register_presets, rotate_half

__all__ = ["LlamaConfig", "LlamaForCausalLM", "LlamaModel", "LlamaRotaryEmbedding", "apply_rotary_pos_emb",
           "rotate_half", "llama", "llama2_7b", "llama3_8b"]


@dataclass
class LlamaConfig(DecoderConfig):
    """transformers' ``LlamaConfig`` fields (defaults: Llama 2 7B, except as registered below)."""

    attention_bias: bool = False
    mlp_bias: bool = False


LlamaRotaryEmbedding, LlamaMLP, LlamaAttention, LlamaDecoderLayer, LlamaModel, LlamaForCausalLM = \
    family_classes("Llama", LlamaConfig)


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

_factories = register_presets(PRESETS, LlamaConfig, LlamaForCausalLM, "llama")
llama, llama2_7b, llama3_8b = (_factories[n] for n in ("llama", "llama2_7b", "llama3_8b"))
