"""Counting conventions: which rules turn shapes into MACs and FLOPs.

* ``flopcount`` (the default of ``profile``): ops use their own cost rule (COUNTING.md's table);
  module rules are independent per-layer formulas (``flopcount_modules.py``), so the eager
  total and the graph total check each other.
* ``ptflops``: the module rules of ptflops/flowflops hooks (``ptflops_modules.py``) for the eager
  view and flowflops' graph-mode op rules (``ptflops_ops.py``) for the graph view.

    >>> from flopcount import conventions
    >>> conv = conventions.get("ptflops")
    >>> conv.name
    'ptflops'
"""

from __future__ import annotations

from .base import Convention, first_tensor, zero_rule
from . import flopcount_modules, ptflops_modules, ptflops_ops


class FlopcountConvention(Convention):
    """COUNTING.md's default: each op's own cost rule; module rules written per layer."""

    name = "flopcount"

    def __init__(self):
        super().__init__(flopcount_modules.MODULE_RULES)

    def op_rule(self, op):
        return op.cost

    def op_cost(self, op, out, inputs, attrs, own=None):
        return own if own is not None else op.cost(out, *inputs, **attrs)

    def op_costs(self, calls, own_costs: list) -> list:
        if type(self).op_cost is not FlopcountConvention.op_cost:  # a subclass prices ops its own way
            return super().op_costs(calls, own_costs)
        # an op's cost here is its own cost: nothing to compute again
        return list(own_costs)


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


__all__ = ["Convention", "FlopcountConvention", "PtflopsConvention", "NAMES", "get", "first_tensor", "zero_rule"]
