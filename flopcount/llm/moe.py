"""Mixture of experts: parameters in total and active per token, experts a decode step touches.

A token runs through k of the E experts of each MoE layer, so the parameters it uses are the
model's minus (E - k) experts per layer. A decode step at batch B routes B tokens; if each picks
its k experts uniformly and independently, an expert is missed by one token with probability
1 - k/E, by all of them with (1 - k/E)^B, so the step is expected to touch

    E · (1 - (1 - k/E)^B)

distinct experts per layer and to read that many experts' weights. A trace on meta has no
router values and runs the balanced routing (min(E, B·k) experts per layer, see mixtral.py);
a run on data, the experts the router chose.

    >>> round(expected_experts(8, 2, 1), 3), round(expected_experts(8, 2, 8), 3)
    (2.0, 7.199)
"""

from __future__ import annotations

from dataclasses import dataclass


def expected_experts(experts: int, top_k: int, tokens: int) -> float:
    """Distinct experts ``tokens`` tokens touch in one layer, each picking ``top_k`` uniformly."""
    return experts * (1.0 - (1.0 - top_k / experts) ** tokens)


@dataclass
class MoESummary:
    """The model's MoE layers: E experts, top-k routing, one expert's parameters per layer."""

    layers: int
    experts: int
    top_k: int
    expert_params: int      # one expert of one layer
    total_params: int
    embedding_params: int = 0   # the input embedding table, when it is not also the output head

    @property
    def active_params(self) -> int:
        """Parameters one token uses: all but the E - k experts it skips in each MoE layer."""
        return self.total_params - self.layers * (self.experts - self.top_k) * self.expert_params

    @property
    def active_params_without_embeddings(self) -> int:
        """The active parameters without the input embedding table (a token reads one row of it):
        how model cards count them (Qwen3-30B-A3B's "3B", gpt-oss-20b's "3.6B")."""
        return self.active_params - self.embedding_params

    def expected_experts(self, tokens: int) -> float:
        return expected_experts(self.experts, self.top_k, tokens)

    def expert_bytes_read(self, tokens: int, bits: int) -> float:
        """Expected expert weight bytes a step over ``tokens`` tokens reads, all MoE layers, at
        ``bits`` per weight."""
        return self.layers * self.expected_experts(tokens) * self.expert_params * bits / 8

    def to_dict(self, batch: int | None = None) -> dict:
        out = {"layers": self.layers, "experts": self.experts, "top_k": self.top_k,
               "expert_params": self.expert_params, "total_params": self.total_params,
               "active_params": self.active_params,
               "active_params_without_embeddings": self.active_params_without_embeddings}
        if batch is not None:
            out["expected_experts_per_decode_step"] = self.expected_experts(batch)
        return out


def moe_summary(model) -> MoESummary | None:
    """The model's MoE layers (modules with ``top_k`` and ``experts.num_experts``), or None."""
    blocks = [m for m in model.modules() if hasattr(m, "top_k") and hasattr(getattr(m, "experts", None), "num_experts")]
    if not blocks:
        return None
    first = blocks[0]
    experts = first.experts.num_experts
    expert_params = sum(p.numel() for p in first.experts.parameters()) // experts
    return MoESummary(layers=len(blocks), experts=experts, top_k=first.top_k, expert_params=expert_params,
                      total_params=sum(p.numel() for p in model.parameters()),
                      embedding_params=untied_embedding_params(model))


def untied_embedding_params(model) -> int:
    """The input embedding table's parameters, unless the output head shares it (then every
    token uses all of it)."""
    embed = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else None
    if embed is None:
        embed = next((m for _, m in model.named_modules() if type(m).__name__ == "Embedding"), None)
    weight = getattr(embed, "weight", None)
    if weight is None:
        return 0
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else getattr(model, "lm_head", None)
    if head is not None and getattr(head, "weight", None) is weight:
        return 0
    return weight.numel()
