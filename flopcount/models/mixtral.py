"""Mixtral sparse mixture-of-experts decoders as Hugging Face transformers' ``MixtralForCausalLM``.

The Llama decoder (``_decoder.py``) whose MLP is a sparse MoE block, with transformers' paths
and parameter layout: ``mlp.gate.weight`` (experts, hidden) is the router, and each layer's
experts are stacked in two 3-d parameters, ``mlp.experts.gate_up_proj`` (experts, 2·ffn, hidden)
and ``mlp.experts.down_proj`` (experts, hidden, ffn).

Routing: softmax over the router's logits (in float32), the ``num_experts_per_tok`` largest
(``topk``), renormalized to sum to one. Each expert runs a SwiGLU over the tokens routed to it
and the outputs come back weighted. Which tokens an expert gets depends on the values:

* on data, the experts actually chosen: an expert no token picked runs nothing and reads no
  weights;
* on the meta device and in a trace, where there are no values, a routing policy
  (``runtime/routing.py``): by default *balanced*, the tokens · k assignments spread evenly over the
  experts. MACs are the same as any routing's (every assignment costs one expert MLP); which and
  how many experts run, and so the weights read, are the policy's.

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

import re
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from .. import runtime as rt
from ..runtime import nn
from ..runtime.factories import empty
from ..runtime.nn import functional as F
from ._decoder import (DecoderAttention, DecoderConfig, DecoderForCausalLM, DecoderLayer, DecoderModel,
                       RotaryEmbedding, register_presets)
from ..runtime.routing import assign, current_policy, grouped
from ._text import activation

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

    def layer_window(self, layer_idx: int) -> int | None:
        return self.sliding_window


class Routing:
    """Where each (token, slot) assignment goes: ``counts[e]`` rows for expert e, the rows grouped
    by expert; ``token_of_row`` (T·k,) the token each row reads; ``row_of_slot`` (T, k) the row
    holding token t's j-th choice; ``measured``: from real router outputs (else balanced)."""

    def __init__(self, counts, token_of_row, row_of_slot, measured: bool):
        self.counts, self.token_of_row, self.row_of_slot, self.measured = counts, token_of_row, row_of_slot, measured

    @classmethod
    def of(cls, top_k_index, num_experts: int) -> "Routing":
        """The router's choice (T, k) when it has values, else the routing policy's
        (``runtime/routing.py``: balanced unless a ``routing_policy`` block says otherwise)."""
        tokens, k = top_k_index.shape
        measured = top_k_index.data is not None
        if measured:
            chosen = np.asarray(top_k_index.numpy()).reshape(-1).tolist()
        else:
            chosen = assign(tokens, k, num_experts, current_policy())
        order, position, _ = grouped(chosen)
        counts = np.bincount(np.asarray(chosen, dtype=np.int64), minlength=num_experts).tolist()
        return cls(counts, np.asarray(order) // k, np.asarray(position).reshape(tokens, k), measured=measured)


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


class MixtralExperts(nn.Module):
    """The experts' SwiGLU MLPs, stacked: expert e computes
    ``down_proj[e] @ (act(gate) * up)`` with ``gate, up = gate_up_proj[e] @ x``."""

    # Which expert runs on which tokens depends on the router's values: a trace (which has none)
    # holds the balanced routing, so graph mode runs this model eagerly.
    replayable = False

    def __init__(self, config: MixtralConfig):
        super().__init__()
        self.num_experts = config.num_local_experts
        self.hidden_dim = config.hidden_size
        self.intermediate_dim = config.intermediate_size
        self.gate_up_proj = nn.Parameter(empty(self.num_experts, 2 * self.intermediate_dim, self.hidden_dim))
        self.down_proj = nn.Parameter(empty(self.num_experts, self.hidden_dim, self.intermediate_dim))
        self.act_fn = activation(config.hidden_act)

    def init_own_weights(self, std: float) -> None:
        nn.init.normal_(self.gate_up_proj, 0.0, std)
        nn.init.normal_(self.down_proj, 0.0, std)

    def forward(self, hidden_states, top_k_index, top_k_weights):
        """hidden_states (T, H), the router's (T, k) choices and weights -> (T, H)."""
        routing = Routing.of(top_k_index, self.num_experts)
        device = hidden_states.device
        rows = hidden_states[rt.tensor(routing.token_of_row, device=device)]  # (T·k, H), grouped by expert
        outputs, start = [], 0
        for e, count in enumerate(routing.counts):
            if count == 0:
                continue  # no token chose this expert: nothing runs, its weights stay unread
            gate, up = F.linear(rows[start:start + count], self.gate_up_proj[e]).chunk(2, dim=-1)
            outputs.append(F.linear(self.act_fn(gate) * up, self.down_proj[e]))
            start += count
        per_slot = rt.cat(outputs, 0)[rt.tensor(routing.row_of_slot, device=device)]  # (T, k, H)
        return (per_slot * top_k_weights.unsqueeze(-1)).to(hidden_states.dtype).sum(1)


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


class MixtralRotaryEmbedding(RotaryEmbedding):
    pass


class MixtralAttention(DecoderAttention):
    pass


class MixtralDecoderLayer(DecoderLayer):
    attention_class = MixtralAttention
    mlp_class = MixtralSparseMoeBlock


class MixtralModel(DecoderModel):
    layer_class = MixtralDecoderLayer
    rotary_class = MixtralRotaryEmbedding


class MixtralForCausalLM(DecoderForCausalLM):
    config_class = MixtralConfig
    model_class = MixtralModel


# --- checkpoints ---------------------------------------------------------------------------------

CHECKPOINT_RENAMES = ((r"\.block_sparse_moe\.", ".mlp."),)
_EXPERT = re.compile(r"^(?P<experts>.+\.experts)\.(?P<index>\d+)\.(?P<which>w[123])\.weight$")


def stack_experts(tensors: dict) -> dict:
    """Per-expert checkpoint tensors (``...experts.{e}.w1/w2/w3.weight``) stacked into the zoo's
    ``...experts.gate_up_proj`` (experts, 2·ffn, hidden: w1 then w3 of each expert) and
    ``...experts.down_proj`` (experts, hidden, ffn: each w2); every other tensor as given.
    ValueError when a layer's experts are incomplete or differ in shape.

    >>> w = {f"experts.{e}.{k}.weight": np.zeros((3, 2)) for e in range(4) for k in ("w1", "w3")}
    >>> w.update({f"experts.{e}.w2.weight": np.zeros((2, 3)) for e in range(4)})
    >>> {k: v.shape for k, v in stack_experts({"x." + k: v for k, v in w.items()}).items()}
    {'x.experts.gate_up_proj': (4, 6, 2), 'x.experts.down_proj': (4, 2, 3)}
    """
    out, layers = {}, defaultdict(dict)
    for name, array in tensors.items():
        match = _EXPERT.match(name)
        if match is None:
            out[name] = array
        else:
            layers[match["experts"]][int(match["index"]), match["which"]] = array
    for prefix, found in layers.items():
        count = 1 + max(index for index, _ in found)
        missing = [f"{prefix}.{e}.{w}.weight" for e in range(count) for w in ("w1", "w2", "w3") if (e, w) not in found]
        if missing:
            raise ValueError(f"{missing[0]} is missing ({count} experts in {prefix})")
        try:
            # a copy: one expert's tensors are apart in the file, the stacked parameter is one array
            out[prefix + ".gate_up_proj"] = np.stack([np.concatenate([found[e, "w1"], found[e, "w3"]])
                                                      for e in range(count)])
            out[prefix + ".down_proj"] = np.stack([found[e, "w2"] for e in range(count)])
        except ValueError as exc:
            raise ValueError(f"{prefix}: the experts' w1/w2/w3 do not stack ({exc})") from None
    return out


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
