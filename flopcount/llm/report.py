"""What an LLM phase costs: the prefill step, the decode steps, their totals and memory.

``LLMReport`` holds the counted steps (``step.StepCost``, ``generation.DecodeSteps``), the
model's KV cache geometry and MoE layers, and renders them: ``table()`` (text), ``to_dict()``
(JSON-ready). Times come from a roofline (``roofline_times.py``) when a hardware profile is given.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .generation import DecodeSteps
from .moe import MoESummary
from .step import Counts, StepCost


@dataclass
class LLMReport:
    """One phase of one decoder at a batch size and dtype.

    ``prefill`` is the prompt's step (None for a decode phase); ``decode`` the decode steps
    summed (one step for ``Decode``, None for ``Prefill``). ``kv_bytes_per_token`` is the cache
    one position of one sequence takes in every layer; ``kv_cache_bytes`` the cache the phase
    ends with, for the whole batch.
    """

    model: str
    phase: object
    batch: int
    dtype: str
    attn_implementation: str
    params: int
    weight_bytes: int
    kv_bytes_per_token: int
    prefill: StepCost | None = None
    decode: DecodeSteps | None = None
    moe: MoESummary | None = None
    layers: list = field(default_factory=list)      # cache.LayerCache per layer
    kv_dtype: str = ""                  # the cache's dtype (the model's unless --kv-dtype)
    routing: str = "balanced"           # the MoE routing policy
    routing_choices: list = field(default_factory=list)  # "real": the last step's (layer, expert per (token, choice))
    roofline: object = None             # timing.PhaseTimes, when a hardware profile was given
    notes: list = field(default_factory=list)

    @property
    def steps(self) -> list:
        """The traced steps whose memory matters: the prefill and the last decode step."""
        return [s for s in (self.prefill, self.decode.last if self.decode else None) if s is not None]

    @property
    def total(self) -> Counts:
        """Prefill and every decode step together."""
        out = Counts()
        if self.prefill is not None:
            out.add(self.prefill.total)
        if self.decode is not None:
            out.add(self.decode.total)
        return out

    @property
    def kv_cache_bytes(self) -> int:
        """The cache at the end of the phase (whole batch)."""
        return self.steps[-1].kv_cache_bytes

    @property
    def peak_memory(self) -> int:
        """Weights + cache + activations, at the step that needs most."""
        return max(s.peak_memory for s in self.steps)

    def table(self, fmt: str = "simple") -> str:
        from .render import render_text

        return render_text(self, fmt)

    def to_dict(self, ops: bool = True) -> dict:
        from .render import report_dict

        return report_dict(self, ops)

    def __str__(self) -> str:
        return self.table()
