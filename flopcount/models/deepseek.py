"""DeepSeek-V2 and DeepSeek-V3 as Hugging Face transformers writes them (``DeepseekV3ForCausalLM``,
``DeepseekV2ForCausalLM``), built natively so a 671B model counts from its config.json at once.

The Llama decoder (``_decoder.py``) with two differences:

* **Multi-head latent attention (MLA).** Queries go through a low-rank pair (``q_a_proj``,
  ``q_a_layernorm``, ``q_b_proj``; or one ``q_proj``). Keys and values come from one compressed
  latent per position: ``kv_a_proj_with_mqa`` gives the ``kv_lora_rank`` latent (normed by
  ``kv_a_layernorm``) and one ``qk_rope_head_dim`` rotary key shared by every head. The cache
  keeps exactly these two per position, as transformers 5, vLLM and SGLang keep them
  (``CacheLayout(keys=(1, kv_lora_rank), values=(1, qk_rope_head_dim), latent=True)``): 1/71 of
  the per-head keys and values on DeepSeek-V3.

  A step attends one of two ways, as serving engines run MLA. A prefill (several new tokens)
  expands the latent with ``kv_b_proj`` into per-head keys (``qk_nope_head_dim``, then the
  rotary part) and values (``v_head_dim``) and attends as multi-head attention. A decode step
  (one new token per sequence) absorbs ``kv_b_proj`` into the query and the output instead: the
  query's no-position part times each head's key block gives a latent query, the scores are
  that against the cached latents plus the rotary query against the cached rotary keys, the
  weighted sum of latents goes through each head's value block. The result is the same; the
  work per step does not grow with the context times ``kv_b_proj``'s size (transformers' own
  code expands the whole cache every step: 67 TFLOPs per token at a 32k context on V3).

* **Mixture of experts** after the first ``first_k_dense_replace`` dense layers: a router (V3:
  sigmoid scores plus a bias for the choice, the best ``topk_group`` of ``n_group`` groups, the
  top-k within them, renormalized and scaled by ``routed_scaling_factor``; V2: softmax scores,
  greedy or group-limited), ``n_routed_experts`` stacked SwiGLU experts (``_experts.py``: the
  router's choice on data, the routing policy on meta), and
  ``n_shared_experts`` always-on experts as one wider MLP.

Rotary embeddings cover the ``qk_rope_head_dim`` dims, with DeepSeek's interleaved pairs, and
YaRN scaling (``rope_inv_freq``; its attention factor scales cos and sin, and its mscale the
softmax, as transformers does). Checkpoints store each expert apart (``experts.{e}.gate_proj``,
``up_proj``, ``down_proj``); ``stack_experts`` stacks them on load.

Presets: ``deepseek_v3_small`` (tests), ``deepseek_v3`` (671B: build it on meta) and
``deepseek_v2_lite`` (15.7B).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .. import runtime as rt
from ..runtime import nn
from ..runtime.factories import empty
from ..runtime.nn import functional as F
from ._cache import CacheLayout
from ._decoder import (DecoderConfig, DecoderForCausalLM, DecoderLayer, DecoderModel, GatedMLP, LayerMask,
                       register_presets, rotate_half as swap_halves, yarn_mscale)
from ._experts import StackedExperts, stack_experts as stack_expert_tensors
from ._text import attention, merge_heads

__all__ = ["DeepseekV3Config", "DeepseekV2Config", "DeepseekV3ForCausalLM", "DeepseekV2ForCausalLM",
           "stack_experts", "adapt_config"]


@dataclass
class DeepseekV3Config(DecoderConfig):
    """transformers' ``DeepseekV3Config`` fields (defaults: DeepSeek-V3)."""

    vocab_size: int = 129280
    hidden_size: int = 7168
    intermediate_size: int = 18432
    moe_intermediate_size: int = 2048
    num_hidden_layers: int = 61
    num_attention_heads: int = 128
    num_key_value_heads: int | None = 128
    n_shared_experts: int = 1
    n_routed_experts: int = 256
    routed_scaling_factor: float = 2.5
    kv_lora_rank: int = 512
    q_lora_rank: int | None = 1536
    qk_rope_head_dim: int = 64
    v_head_dim: int = 128
    qk_nope_head_dim: int = 128
    n_group: int = 8
    topk_group: int = 4
    num_experts_per_tok: int = 8
    first_k_dense_replace: int = 3
    norm_topk_prob: bool = True
    rope_interleave: bool = True
    attention_bias: bool = False
    max_position_embeddings: int = 4096
    rms_norm_eps: float = 1e-6
    topk_method: str = "noaux_tc"     # V3's sigmoid scores with a bias for the choice

    def __post_init__(self):
        self.head_dim = self.qk_rope_head_dim   # the rotary dims, as transformers sets it
        super().__post_init__()

    @property
    def qk_head_dim(self) -> int:
        return self.qk_nope_head_dim + self.qk_rope_head_dim


@dataclass
class DeepseekV2Config(DeepseekV3Config):
    """transformers' ``DeepseekV2Config`` fields (defaults: DeepSeek-V2-Lite)."""

    vocab_size: int = 102400
    hidden_size: int = 2048
    intermediate_size: int = 10944
    moe_intermediate_size: int = 1408
    num_hidden_layers: int = 27
    num_attention_heads: int = 16
    num_key_value_heads: int | None = 16
    n_shared_experts: int = 2
    n_routed_experts: int = 64
    routed_scaling_factor: float = 1.0
    q_lora_rank: int | None = None
    n_group: int = 1
    topk_group: int = 1
    num_experts_per_tok: int = 6
    first_k_dense_replace: int = 1
    norm_topk_prob: bool = False
    topk_method: str = "greedy"
    max_position_embeddings: int = 163840


def adapt_config(data: dict) -> dict:
    """config.json's spellings of the expert count (``n_routed_experts``; ``num_local_experts``
    or ``num_experts`` in some files) as the dataclass's."""
    data = dict(data)
    if "n_routed_experts" not in data:
        for key in ("num_local_experts", "num_experts"):
            if key in data:
                data["n_routed_experts"] = data[key]
                break
    return data


# --- attention -------------------------------------------------------------------------------------

def rotate_interleaved(x, cos, sin):
    """DeepSeek's rotary turn of pairs (x0, x1), (x2, x3)...: the turned pairs' first elements,
    then their second ones (transformers' ``apply_rotary_pos_emb_interleave``)."""
    half = cos.shape[-1] // 2
    cos, sin = cos[..., :half], sin[..., :half]
    pairs = x.reshape(*x.shape[:-1], half, 2)
    even, odd = pairs[..., 0], pairs[..., 1]
    return rt.cat((even * cos - odd * sin, odd * cos + even * sin), dim=-1)


def rotate_half(x, cos, sin):
    """The Llama decoder's rotary turn of the two halves (``rope_interleave`` off)."""
    return x * cos + swap_halves(x) * sin


class MLAttention(nn.Module):
    """Multi-head latent attention (module docstring)."""

    def __init__(self, config: DeepseekV3Config, layer_idx: int):
        super().__init__()
        self.config = config
        self.layer_idx = layer_idx
        self.heads = config.num_attention_heads
        self.nope, self.rope, self.v_dim = config.qk_nope_head_dim, config.qk_rope_head_dim, config.v_head_dim
        self.rank = config.kv_lora_rank
        self.sliding_window = None
        h, bias = config.hidden_size, config.attention_bias
        if config.q_lora_rank is None:
            self.q_proj = nn.Linear(h, self.heads * config.qk_head_dim, bias=False)
        else:
            self.q_a_proj = nn.Linear(h, config.q_lora_rank, bias=bias)
            self.q_a_layernorm = nn.RMSNorm(config.q_lora_rank, eps=config.rms_norm_eps)
            self.q_b_proj = nn.Linear(config.q_lora_rank, self.heads * config.qk_head_dim, bias=False)
        self.kv_a_proj_with_mqa = nn.Linear(h, self.rank + self.rope, bias=bias)
        self.kv_a_layernorm = nn.RMSNorm(self.rank, eps=config.rms_norm_eps)
        self.kv_b_proj = nn.Linear(self.rank, self.heads * (self.nope + self.v_dim), bias=False)
        self.o_proj = nn.Linear(self.heads * self.v_dim, h, bias=bias)
        self.scaling = config.qk_head_dim ** -0.5 * rope_softmax_mscale(config) ** 2

    def _rotate(self, x, cos, sin):
        turn = rotate_interleaved if self.config.rope_interleave else rotate_half
        return turn(x, cos.unsqueeze(1), sin.unsqueeze(1))

    def forward(self, hidden_states, position_embeddings, attention_mask: LayerMask, past_key_values=None):
        batch, length, _ = hidden_states.shape
        if self.config.q_lora_rank is None:
            q = self.q_proj(hidden_states)
        else:
            q = self.q_b_proj(self.q_a_layernorm(self.q_a_proj(hidden_states)))
        q = q.reshape(batch, length, self.heads, self.nope + self.rope).transpose(1, 2)
        q_nope, q_rot = q[..., :self.nope], q[..., self.nope:]
        compressed = self.kv_a_proj_with_mqa(hidden_states)
        latent = self.kv_a_layernorm(compressed[..., :self.rank]).reshape(batch, 1, length, self.rank)
        k_rot = compressed[..., self.rank:].reshape(batch, 1, length, self.rope)
        cos, sin = position_embeddings
        q_rot, k_rot = self._rotate(q_rot, cos, sin), self._rotate(k_rot, cos, sin)
        if past_key_values is not None:
            latent, k_rot = past_key_values.update(latent, k_rot, self.layer_idx)
        if length == 1:
            out = self._absorbed(q_nope, q_rot, latent, k_rot, attention_mask)
        else:
            out = self._expanded(q_nope, q_rot, latent, k_rot, attention_mask)
        return self.o_proj(merge_heads(out))

    def _blocks(self):
        """``kv_b_proj``'s weight as each head's key block (H, nope, rank) and value block (H, v, rank)."""
        w = self.kv_b_proj.weight.reshape(self.heads, self.nope + self.v_dim, self.rank)
        return w[:, :self.nope, :], w[:, self.nope:, :]

    def _expanded(self, q_nope, q_rot, latent, k_rot, mask: LayerMask):
        """Multi-head attention over the latent expanded into per-head keys and values."""
        batch, _, keys, _ = latent.shape
        kv = self.kv_b_proj(latent.reshape(batch, keys, self.rank))
        kv = kv.reshape(batch, keys, self.heads, self.nope + self.v_dim).transpose(1, 2)
        k = rt.cat((kv[..., :self.nope], k_rot.expand(batch, self.heads, keys, self.rope)), dim=-1)
        q = rt.cat((q_nope, q_rot), dim=-1)
        return attention(q, k, kv[..., self.nope:], mask.mask, scaling=self.scaling,
                         implementation=self.config.attn_implementation, causal=mask.is_causal,
                         dropout_p=self.config.attention_dropout, training=self.training)

    def _absorbed(self, q_nope, q_rot, latent, k_rot, mask: LayerMask):
        """Attention in the latent space: ``kv_b_proj`` folded into the query and the output."""
        key_block, value_block = self._blocks()
        q_latent = rt.matmul(q_nope, key_block)                        # (B, H, 1, rank)
        scores = rt.matmul(q_latent, latent.transpose(-2, -1)) + rt.matmul(q_rot, k_rot.transpose(-2, -1))
        scores = scores * self.scaling
        if mask.mask is not None:
            m = mask.mask
            scores = scores + m.to(scores.dtype) if m.dtype.is_floating_point else scores.masked_fill(
                rt.logical_not(m), float("-inf"))
        weights = F.softmax(scores.float(), dim=-1).to(q_nope.dtype)
        context = rt.matmul(weights, latent)                            # (B, H, 1, rank)
        return rt.matmul(context, value_block.transpose(-2, -1))        # (B, H, 1, v)


def rope_softmax_mscale(config: DecoderConfig) -> float:
    """YaRN's mscale DeepSeek folds into the softmax scale (``yarn_apply_mscale``): squared there."""
    rope = config.rope()
    if rope.get("rope_type", "default") == "default" or not rope.get("mscale_all_dim"):
        return 1.0
    return yarn_mscale(rope["factor"], rope["mscale_all_dim"])


# --- mixture of experts ---------------------------------------------------------------------------

class DeepseekTopkRouter(nn.Module):
    """The router (module docstring): ``weight`` (experts, hidden); V3's ``e_score_correction_bias``."""

    def __init__(self, config: DeepseekV3Config):
        super().__init__()
        self.config = config
        self.top_k = config.num_experts_per_tok
        self.num_experts = config.n_routed_experts
        self.weight = nn.Parameter(empty(self.num_experts, config.hidden_size))
        if config.topk_method == "noaux_tc":
            self.register_buffer("e_score_correction_bias", rt.zeros(self.num_experts))

    def init_own_weights(self, std: float) -> None:
        nn.init.normal_(self.weight, 0.0, std)

    def reset_buffers(self) -> None:
        """The bias starts at zero (a checkpoint's own bias is then loaded over it)."""
        if hasattr(self, "e_score_correction_bias"):
            self.e_score_correction_bias.copy_(rt.zeros(self.num_experts))

    def forward(self, hidden_states):
        """(tokens, hidden) -> (weights (tokens, k), experts (tokens, k))."""
        c = self.config
        logits = F.linear(hidden_states.float(), self.weight.float())
        if c.topk_method == "noaux_tc":
            scores = F.sigmoid(logits)
            choice = scores + self.e_score_correction_bias
            per_group = choice.reshape(-1, c.n_group, self.num_experts // c.n_group)
            group_scores = F.topk(per_group, 2, dim=-1)[0].sum(-1)
            choice = self._within_groups(choice, group_scores, float("-inf"))
            index = F.topk(choice, self.top_k, dim=-1)[1]
            weights = scores.gather(1, index)
            if c.norm_topk_prob:
                weights = weights / (weights.sum(-1, keepdim=True) + 1e-20)
        else:
            scores = F.softmax(logits, dim=-1)
            if c.topk_method == "group_limited_greedy":
                per_group = scores.reshape(-1, c.n_group, self.num_experts // c.n_group)
                scores = self._within_groups(scores, per_group.amax(-1), 0.0)
            weights, index = F.topk(scores, self.top_k, dim=-1)
        return weights * c.routed_scaling_factor, index

    def _within_groups(self, scores, group_scores, fill: float):
        """``scores`` with every expert outside the best ``topk_group`` groups set to ``fill``."""
        c = self.config
        best = F.topk(group_scores, c.topk_group, dim=-1)[1]
        chosen = F.one_hot(best, c.n_group).sum(-2) > 0                     # (tokens, groups)
        chosen = chosen.unsqueeze(-1).expand(chosen.shape[0], c.n_group, self.num_experts // c.n_group)
        return scores.masked_fill(rt.logical_not(chosen.reshape(-1, self.num_experts)), fill)


class DeepseekExperts(StackedExperts):
    """The routed experts' SwiGLU MLPs, stacked (``_experts.py``)."""

    def __init__(self, config: DeepseekV3Config):
        super().__init__(config.n_routed_experts, config.hidden_size, config.moe_intermediate_size, config.hidden_act)


class SharedExperts(GatedMLP):
    """The ``n_shared_experts`` always-on experts as one SwiGLU of their summed width."""

    def __init__(self, config: DeepseekV3Config):
        super().__init__(replace(config, intermediate_size=config.moe_intermediate_size * config.n_shared_experts))


class DeepseekMoE(nn.Module):
    """Routed experts plus the shared ones (``moe_summary`` finds ``top_k`` and ``experts``)."""

    def __init__(self, config: DeepseekV3Config):
        super().__init__()
        self.top_k = config.num_experts_per_tok
        self.gate = DeepseekTopkRouter(config)
        self.experts = DeepseekExperts(config)
        self.shared_experts = SharedExperts(config)

    def forward(self, hidden_states):
        shape = hidden_states.shape
        flat = hidden_states.reshape(-1, shape[-1])
        weights, index = self.gate(flat)
        routed = self.experts(flat, index, weights).reshape(*shape)
        return routed + self.shared_experts(hidden_states)


# --- the model ------------------------------------------------------------------------------------

class DeepseekDecoderLayer(DecoderLayer):
    attention_class = MLAttention

    def __init__(self, config: DeepseekV3Config, layer_idx: int):
        nn.Module.__init__(self)
        self.self_attn = MLAttention(config, layer_idx)
        self.mlp = DeepseekMoE(config) if layer_idx >= config.first_k_dense_replace else GatedMLP(config)
        self.input_layernorm = nn.RMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.post_attention_layernorm = nn.RMSNorm(config.hidden_size, eps=config.rms_norm_eps)


class DeepseekModel(DecoderModel):
    layer_class = DeepseekDecoderLayer


class DeepseekV3ForCausalLM(DecoderForCausalLM):
    config_class = DeepseekV3Config
    model_class = DeepseekModel
    # what an LLM phase's report says of how this model's steps are counted
    llm_notes = ("latent attention: a decode step attends in the latent space (kv_b_proj absorbed into the query "
                 "and the output, as vLLM and SGLang run it); a prefill expands the latent per head",)

    def kv_cache_layout(self) -> list:
        """Each layer caches its latent and its rotary key (module docstring)."""
        c = self.config
        return [CacheLayout((1, c.kv_lora_rank), (1, c.qk_rope_head_dim), None, latent=True)
                for _ in range(c.num_hidden_layers)]


class DeepseekV2ForCausalLM(DeepseekV3ForCausalLM):
    config_class = DeepseekV2Config


# --- checkpoints ------------------------------------------------------------------------------------

def stack_experts(tensors: dict) -> dict:
    """Per-expert checkpoint tensors (``...experts.{e}.gate_proj/up_proj/down_proj.weight``)
    stacked into ``...experts.gate_up_proj`` and ``down_proj`` (``_experts.stack_experts``)."""
    return stack_expert_tensors(tensors, gate="gate_proj", up="up_proj", down="down_proj")


PRESETS_V3 = {
    "deepseek_v3_small": ("DeepSeek-V3's architecture, small (2 layers, 4 experts): for tests", 162_528,
                          dict(vocab_size=512, hidden_size=64, intermediate_size=128, moe_intermediate_size=32,
                               num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
                               n_routed_experts=4, num_experts_per_tok=2, n_group=2, topk_group=1,
                               first_k_dense_replace=1, kv_lora_rank=32, q_lora_rank=48, qk_rope_head_dim=16,
                               qk_nope_head_dim=16, v_head_dim=16, max_position_embeddings=4096)),
    "deepseek_v3": ("DeepSeek-V3 671B (37B active, multi-head latent attention; build it on meta)",
                    671_026_404_352, dict(vocab_size=129280, max_position_embeddings=163840,
                                          rope_scaling={"type": "yarn", "factor": 40,
                                                        "original_max_position_embeddings": 4096, "beta_fast": 32,
                                                        "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0})),
}
PRESETS_V2 = {
    "deepseek_v2_lite": ("DeepSeek-V2-Lite 15.7B (2.4B active; build it on meta)", 15_706_484_224,
                         dict(vocab_size=102400)),
}

register_presets(PRESETS_V3, DeepseekV3Config, DeepseekV3ForCausalLM, "deepseek")
register_presets(PRESETS_V2, DeepseekV2Config, DeepseekV2ForCausalLM, "deepseek")
