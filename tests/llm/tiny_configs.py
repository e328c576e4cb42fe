"""Tiny configs of the decoders transformers builds, for tests that make random-weight folders.

Each entry is a ``model_type`` and the fields that make it small (2-4 layers, hidden 64, 4 heads,
vocabulary 512) while keeping what makes the architecture itself: grouped-query heads, sliding
and global layers, latent attention, experts with shared ones and dense first layers, Mamba and
linear-attention layers beside attention ones.
"""

from __future__ import annotations

COMMON = dict(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, head_dim=16, max_position_embeddings=4096, pad_token_id=0, bos_token_id=1,
              eos_token_id=2, tie_word_embeddings=False)

MOE = dict(num_local_experts=4, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32)

TINY = {
    "llama": {},
    "mistral": dict(sliding_window=16),
    "qwen2": {},
    "qwen3": {},
    "qwen3_moe": dict(MOE, decoder_sparse_step=1, mlp_only_layers=[]),
    "gemma2": dict(sliding_window=16, num_hidden_layers=2),
    "gemma3_text": dict(sliding_window=16, num_hidden_layers=6),
    "phi3": dict(sliding_window=None),
    "deepseek_v2": dict(MOE, n_routed_experts=4, n_shared_experts=1, first_k_dense_replace=1, num_key_value_heads=4,
                        kv_lora_rank=32, q_lora_rank=48, qk_rope_head_dim=16, qk_nope_head_dim=16, v_head_dim=16,
                        head_dim=16, n_group=1, topk_group=1),
    "deepseek_v3": dict(MOE, n_routed_experts=4, n_shared_experts=1, first_k_dense_replace=1, num_key_value_heads=4,
                        kv_lora_rank=32, q_lora_rank=48, qk_rope_head_dim=16, qk_nope_head_dim=16, v_head_dim=16,
                        head_dim=16, n_group=2, topk_group=1),
    "gpt_oss": dict(MOE, sliding_window=16, layer_types=["sliding_attention", "full_attention"]),
    "mixtral": dict(MOE),
    "olmo2": {},
    "granite": {},
    "granitemoe": dict(MOE),
    "glm4": {},
    "glm4_moe": dict(MOE, n_routed_experts=4, n_shared_experts=1, first_k_dense_replace=1, n_group=1, topk_group=1),
    "smollm3": {},
    "jamba": dict(MOE, num_hidden_layers=4, attn_layer_period=2, attn_layer_offset=1, expert_layer_period=2,
                  expert_layer_offset=1, mamba_d_state=8, mamba_d_conv=4, mamba_expand=2, mamba_dt_rank=8),
    "mamba": dict(num_hidden_layers=2, state_size=8, conv_kernel=4, expand=2, time_step_rank=8),
    "falcon_h1": dict(mamba_d_ssm=64, mamba_n_heads=4, mamba_d_head=16, mamba_n_groups=1, mamba_d_state=8,
                      mamba_d_conv=4, mamba_expand=2, mamba_chunk_size=16),
    "llama4_text": dict(MOE, intermediate_size_mlp=128, interleave_moe_layer_step=1, attention_chunk_size=16,
                        no_rope_layers=[1, 0], num_hidden_layers=2),
    "gpt2": dict(n_embd=64, n_layer=2, n_head=4, n_positions=4096),
    "qwen3_next": dict(MOE, num_hidden_layers=4, full_attention_interval=2, linear_num_value_heads=4,
                       linear_num_key_heads=2, linear_key_head_dim=16, linear_value_head_dim=16,
                       linear_conv_kernel_dim=4, shared_expert_intermediate_size=32, decoder_sparse_step=1,
                       mlp_only_layers=[]),
}


def config(model_type: str):
    """The tiny transformers config of ``model_type``: its defaults, then COMMON, then its own
    (given to the config's constructor, which derives the rest, such as each layer's type)."""
    from transformers import AutoConfig

    return AutoConfig.for_model(model_type, **{**COMMON, **TINY[model_type]})
