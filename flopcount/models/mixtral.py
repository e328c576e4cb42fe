"""Mixtral sparse mixture-of-experts decoders as Hugging Face transformers' ``MixtralForCausalLM``.

The Llama decoder (``_decoder.py``) whose MLP is a sparse MoE block, with transformers' paths
and parameter layout: ``mlp.gate.weight`` (experts, hidden) is the router, and each layer's
experts are stacked in two 3-d parameters, ``mlp.experts.gate_up_proj`` (experts, 2·ffn, hidden)
and ``mlp.experts.down_proj`` (experts, hidden, ffn).

Routing: softmax over the router's logits (in float32), the ``num_experts_per_tok`` largest
(``topk``), renormalized to sum to one. Each expert runs a SwiGLU over the tokens routed to it
and the outputs come back weighted (``_experts.py``: the router's choice on data, a routing
policy on meta).

Checkpoints (Mixtral's published ones, and what transformers 5's ``save_pretrained`` writes
back by default) store every expert apart, under ``block_sparse_moe``:
``experts.{e}.w1.weight`` (gate), ``w3`` (up) and ``w2`` (down). ``CHECKPOINT_RENAMES`` and
``stack_experts`` turn them into the stacked layout on load, as transformers' conversion mapping
does; a checkpoint already stacked (``save_pretrained(..., save_original_format=False)``) loads
as it is.

Presets: ``mixtral`` (small: 2 layers, 4 experts, top-2, for tests) and ``mixtral_8x7b``
(Mixtral 8x7B: 46.7B parameters, 12.9B active per token; build it on meta).
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import runtime as rt
from ..runtime import nn
from ..runtime.factories import empty
from ..runtime.nn import functional as F
from ._decoder import DecoderConfig, family_classes, register_presets
from ._experts import Routing, StackedExperts, stack_experts as stack_expert_tensors

__all__ = ["MixtralConfig", "MixtralForCausalLM", "MixtralModel", "MixtralSparseMoeBlock", "Routing", "mixtral",
           "mixtral_8x7b", "CHECKPOINT_RENAMES", "stack_experts"]


@dataclass
class MixtralConfig(DecoderConfig):
    """transformers' ``MixtralConfig`` fields (defaults: Mixtral 8x7B)."""

    intermediate_size: int = 14336
    num_key_value_heads: int | None = 8
    max_position_embeddings: int = 4096 * 32
    rms_norm_eps: float = 1e-5
    rope_theta: float = 1000000.0
    sliding_window: int | None = None
    num_experts_per_tok: int = 2
    num_local_experts: int = 8
    output_router_logits: bool = False
    router_aux_loss_coef: float = 0.001
    router_jitter_noise: float = 0.0

    def __post_init__(self):
        super().__post_init__()
        if not 1 <= self.num_experts_per_tok <= self.num_local_experts:
            raise ValueError(f"MixtralConfig: num_experts_per_tok must lie in [1, num_local_experts "
                             f"{self.num_local_experts}], got {self.num_experts_per_tok}")


class MixtralTopKRouter(nn.Module):
    """Router logits, the top-k experts' renormalized probabilities, and their indices."""

    def __init__(self, config: MixtralConfig):
        super().__init__()
        self.top_k = config.num_experts_per_tok
        self.num_experts = config.num_local_experts
        self.hidden_dim = config.hidden_size
        self.weight = nn.Parameter(empty(self.num_experts, self.hidden_dim))

    def init_own_weights(self, std: float) -> None:
        nn.init.normal_(self.weight, 0.0, std)

    def forward(self, hidden_states):
        router_logits = F.linear(hidden_states, self.weight)  # (tokens, experts)
        probs = F.softmax(router_logits.float(), dim=-1)
        top_value, top_index = F.topk(probs, self.top_k, dim=-1)
        return router_logits, top_value / top_value.sum(-1, keepdim=True), top_index


class MixtralExperts(StackedExperts):
    """The experts' SwiGLU MLPs, stacked (``_experts.py``)."""

    def __init__(self, config: MixtralConfig):
        super().__init__(config.num_local_experts, config.hidden_size, config.intermediate_size, config.hidden_act)


class MixtralSparseMoeBlock(nn.Module):
    """Route each token to its top-k experts and sum their outputs by the router's weights."""

    def __init__(self, config: MixtralConfig):
        super().__init__()
        self.top_k = config.num_experts_per_tok
        self.jitter_noise = config.router_jitter_noise
        self.gate = MixtralTopKRouter(config)
        self.experts = MixtralExperts(config)

    def forward(self, hidden_states):
        batch, length, hidden = hidden_states.shape
        if self.training and self.jitter_noise > 0:
            noise = rt.rand_like(hidden_states) * (2 * self.jitter_noise) + (1.0 - self.jitter_noise)
            hidden_states = hidden_states * noise
        flat = hidden_states.reshape(-1, hidden)
        _, top_k_weights, top_k_index = self.gate(flat)
        return self.experts(flat, top_k_index, top_k_weights).reshape(batch, length, hidden)


MixtralRotaryEmbedding, _, MixtralAttention, MixtralDecoderLayer, MixtralModel, MixtralForCausalLM = \
    family_classes("Mixtral", MixtralConfig, mlp=MixtralSparseMoeBlock)


# --- checkpoints ---------------------------------------------------------------------------------

CHECKPOINT_RENAMES = ((r"\.block_sparse_moe\.", ".mlp."),)


def stack_experts(tensors: dict) -> dict:
    """Per-expert checkpoint tensors (``...experts.{e}.w1/w2/w3.weight``: gate, down, up) stacked
    into the zoo's ``...experts.gate_up_proj`` (w1 then w3 of each expert) and ``down_proj``
    (each w2); every other tensor as given (``_experts.stack_experts``)."""
    return stack_expert_tensors(tensors, gate="w1", up="w3", down="w2")


PRESETS = {
    "mixtral": ("small Mixtral-style MoE decoder (2 layers, hidden 256, 4 experts, top-2)", 19_860_736,
                dict(vocab_size=32000, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                     num_attention_heads=8, num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2)),
    "mixtral_8x7b": ("Mixtral 8x7B: 8 experts, top-2, GQA 32/8 (build it on meta)", 46_702_792_704,
                     dict(vocab_size=32000, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                          num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=32768,
                          rms_norm_eps=1e-5, rope_theta=1000000.0, num_local_experts=8, num_experts_per_tok=2)),
}

_factories = register_presets(PRESETS, MixtralConfig, MixtralForCausalLM, "mixtral")
mixtral, mixtral_8x7b = _factories["mixtral"], _factories["mixtral_8x7b"]
