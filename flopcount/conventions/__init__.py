"""Counting conventions: which rules turn shapes into MACs and FLOPs.

* ``flopcount`` (the default of ``profile``): ops use their own cost rule (COUNTING.md's table)
  and a module costs the ops it runs, in both views. COUNTING.md's independent per-layer
  formulas are the tests' oracle for the op rules (``tests/module_formulas.py``), not a
  second way of counting.
* ``ptflops``: the module rules of ptflops/flowflops hooks (``ptflops_modules.py``) for the eager
  view and flowflops' graph-mode op rules (``ptflops_ops.py``) for the graph view.

    >>> from flopcount import conventions
    >>> conv = conventions.get("ptflops")
    >>> conv.name
    'ptflops'
"""

from __future__ import annotations

from ..runtime.registry import Cost
from .base import Convention, first_tensor, zero_rule
from . import ptflops_modules, ptflops_ops


CAUSAL = ("full", "half")


class FlopcountConvention(Convention):
    """COUNTING.md's default: each op's own cost rule; a module costs the ops it runs (no
    module rules, but those a user adds with ``with_modules``).

    ``causal="half"`` counts only the unmasked half of a causal attention's contractions, for
    kernels that skip the masked half (the default counts what the runtime's kernel computes:
    the full score matrix, masked).

    >>> FlopcountConvention(causal="half").causal
    'half'
    """

    name = "flopcount"

    def __init__(self, causal: str = "full"):
        if causal not in CAUSAL:
            raise ValueError(f"causal must be one of {CAUSAL}, got {causal!r}")
        self.causal = causal
        super().__init__({})

    def op_rule(self, op):
        return op.cost if op.priced else None

    def op_cost(self, op, out, inputs, attrs, own=None):
        if not op.priced:
            return None
        cost = own if own is not None else op.cost(out, *inputs, **attrs)
        return self._causal(op, attrs, cost) if self.causal == "half" else cost

    def op_costs(self, calls, own_costs: list) -> list:
        if type(self).op_cost is not FlopcountConvention.op_cost or self.causal != "full":
            return super().op_costs(calls, own_costs)
        # an op's cost here is its own cost: nothing to compute again
        return [own if c.op.priced else None for c, own in zip(calls, own_costs)]

    @staticmethod
    def _causal(op, attrs, cost: Cost) -> Cost:
        """``cost`` without the masked half of a causal attention's score contractions (the op
        says how many sweeps of the scores its MACs are: ``score_contractions``)."""
        sweeps = op.score_contractions
        if not sweeps or not attrs.get("is_causal"):
            return cost
        kept = sweeps * (cost.macs // sweeps // 2)
        dropped = cost.macs - kept
        return Cost(kept, cost.flops - 2 * dropped, cost.bytes_read, cost.bytes_written)


class PtflopsConvention(Convention):
    """ptflops' module hooks (eager) and flowflops' graph-mode op rules (graph)."""

    name = "ptflops"
    counts_functional = False  # ptflops' hooks never see an op run directly in a forward

    def __init__(self):
        super().__init__(ptflops_modules.MODULE_RULES)

    def op_rule(self, op):
        return ptflops_ops.op_rule(op)


NAMES = ("flopcount", "ptflops")


def get(name: str | Convention) -> Convention:
    """The convention called ``name`` (a Convention passes through)."""
    if isinstance(name, Convention):
        return name
    if name == "flopcount":
        return FlopcountConvention()
    if name == "ptflops":
        return PtflopsConvention()
    raise ValueError(f"unknown convention {name!r}; choose one of {', '.join(NAMES)}")


__all__ = ["Convention", "FlopcountConvention", "CAUSAL", "PtflopsConvention", "NAMES", "get", "first_tensor", "zero_rule"]
