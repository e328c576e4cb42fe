"""A whole generation: the prefill, then many decode steps with the context growing by one,
summed exactly without tracing every step.

A decode step's graph has the same nodes at every context; each node's MACs, FLOPs and bytes
are affine in the context c (the attention reads c + 1 keys, the mask has c + 1 columns, the
rest does not depend on c) until a sliding window fills: a layer with window W keeps W - 1
tokens, so from c = W - 1 on its cost stays constant. The contexts are split at those points;
on each piece the steps at both ends are traced, every node's slope is their difference over
the distance (it must divide exactly), and a third trace in the middle must equal the line, or
the sum is refused. Σ_{i<n} (a + b·i) = n·a + b·n(n-1)/2 then gives every node's total.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..runtime.errors import FlopcountError
from .cache import breakpoints
from .phases import Decode
from .step import COUNTS, Counts, OpCost, StepCost, count_step, grouped


class NotAffineError(FlopcountError):
    """A decode step's cost was not affine in the context where it should be."""


@dataclass
class Piece:
    """Contexts ``first`` .. ``first + steps - 1``: each node's counts at ``first`` and per context."""

    first: int
    steps: int
    base: list      # Counts per node at context ``first``
    slope: list     # Counts per node, added per context


@dataclass
class DecodeSteps:
    """The decode steps at ``contexts``, summed: per node, per group and in total."""

    contexts: range
    first: StepCost                 # the step at the first context, traced
    last: StepCost                  # the step at the last context, traced
    pieces: list = field(default_factory=list)
    ops: list = field(default_factory=list)
    groups: list = field(default_factory=list)
    total: Counts = field(default_factory=Counts)
    traced: list = field(default_factory=list)   # the contexts traced (ends and checks)

    def at(self, context: int) -> list:
        """Every node's Counts at ``context``, from the affine pieces."""
        for piece in self.pieces:
            if piece.first <= context < piece.first + piece.steps:
                i = context - piece.first
                return [_affine(b, s, i) for b, s in zip(piece.base, piece.slope)]
        raise ValueError(f"context {context} is not one of {self.contexts}")


def _affine(base: Counts, slope: Counts, i: int) -> Counts:
    return Counts(**{name: getattr(base, name) + i * getattr(slope, name) for name in COUNTS})


def decode_steps(decoder, contexts: range, batch: int, kv_bits: int | None = None) -> DecodeSteps:
    """The decode steps of ``decoder`` (``decoders.py``) at ``contexts`` (a range with step 1),
    summed exactly (module docstring)."""
    if contexts.step != 1 or len(contexts) == 0:
        raise ValueError(f"decode_steps: contexts must be a non-empty range with step 1, got {contexts}")
    cuts = [contexts.start] + breakpoints(decoder.layers, contexts) + [contexts.stop]
    traced: dict = {}

    def step_at(context: int) -> StepCost:
        if context not in traced:
            phase = Decode(context)
            traced[context] = count_step(decoder, decoder.trace(phase, batch), phase, batch, kv_bits)
        return traced[context]

    result = DecodeSteps(contexts=contexts, first=step_at(contexts.start), last=step_at(contexts.stop - 1))
    for lo, stop in zip(cuts, cuts[1:]):
        result.pieces.append(_piece(step_at, lo, stop - 1))
    # A piece past a window's fill has nodes the earlier ones lack (the cache cut to the window):
    # nodes are matched across pieces by scope, op and rank among the scope's nodes of that op.
    sums: dict = {}
    for piece in result.pieces:
        n = piece.steps
        for key, base, slope in zip(_node_keys(piece.base), piece.base, piece.slope):
            total = sums.setdefault(key, OpCost(name=base.name, op=base.op, scope=base.scope, group=base.group,
                                                shape=base.shape))
            total.add(base, n)
            total.add(slope, n * (n - 1) // 2)
    result.ops = list(sums.values())
    result.groups, result.total = grouped(result.ops)
    result.traced = sorted(traced)
    return result


def _piece(step_at, lo: int, hi: int) -> Piece:
    """Contexts lo..hi: ends traced, slope per node, the middle checked against the line."""
    low = step_at(lo)
    if hi == lo:
        return Piece(lo, 1, low.ops, [Counts() for _ in low.ops])
    high = step_at(hi)
    _same_nodes(low, high)
    slope = []
    for a, b in zip(low.ops, high.ops):
        per = Counts()
        for name in COUNTS:
            rise = getattr(b, name) - getattr(a, name)
            if rise % (hi - lo):
                raise NotAffineError(f"decode step {a.name}: {name} rises by {rise} over {hi - lo} contexts "
                                     f"({lo} to {hi}), not a whole number per context")
            setattr(per, name, rise // (hi - lo))
        slope.append(per)
    piece = Piece(lo, hi - lo + 1, low.ops, slope)
    if hi - lo >= 2:
        mid = (lo + hi) // 2
        check = step_at(mid)
        _same_nodes(low, check)
        for expected, got in zip((_affine(b, s, mid - lo) for b, s in zip(piece.base, piece.slope)), check.ops):
            if expected.counts() != got.counts():
                raise NotAffineError(f"decode step {got.name} at context {mid}: traced {got.counts()}, "
                                     f"the line through contexts {lo} and {hi} gives {expected.counts()}")
    return piece


def _node_keys(ops: list) -> list:
    """(scope, op, rank among the scope's nodes of that op) of each node."""
    seen: dict = {}
    keys = []
    for op in ops:
        rank = seen[op.scope, op.op] = seen.get((op.scope, op.op), -1) + 1
        keys.append((op.scope, op.op, rank))
    return keys


def _same_nodes(a: StepCost, b: StepCost) -> None:
    if [op.op for op in a.ops] != [op.op for op in b.ops]:
        raise NotAffineError(f"decode steps at contexts {a.context} and {b.context} trace to different graphs")
