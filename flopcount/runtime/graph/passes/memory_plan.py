"""The memory plan: when the executor releases each value, and where each activation would
sit in one arena that reuses the space of dead values.

The executor uses ``free_after``: after node i it drops every value whose last use is node i,
so the allocator (numpy's, or CuPy's pool) reuses that memory and the run holds what liveness
predicts. ``offsets`` is the static layout a fixed-arena allocator would use (greedy by size:
the largest storages are placed first at the lowest offset that no storage alive at the same
time occupies); ``arena_bytes`` is its size, at least the liveness peak.
"""

from __future__ import annotations

from .liveness import Liveness, liveness

ALIGNMENT = 64  # bytes; what numpy and CuPy align large allocations to


class MemoryPlan:
    def __init__(self, live: Liveness, free_after: list):
        self.liveness = live
        self.free_after = free_after  # per node index: names of values to release after it
        self._offsets = None

    @property
    def peak_bytes(self) -> int:
        return self.liveness.peak_bytes

    @property
    def offsets(self) -> dict:
        """Storage owner -> byte offset in the arena."""
        if self._offsets is None:
            self._offsets = _greedy_by_size(self.liveness)
        return self._offsets

    @property
    def arena_bytes(self) -> int:
        sizes = self.liveness.storage_bytes
        return max((off + _aligned(sizes[o]) for o, off in self.offsets.items()), default=0)

    def __repr__(self) -> str:
        return f"MemoryPlan(peak_bytes={self.peak_bytes}, steps={len(self.free_after)})"


def _aligned(n: int) -> int:
    return -(-n // ALIGNMENT) * ALIGNMENT


def _greedy_by_size(live: Liveness) -> dict:
    placed = []  # (offset, size, first, last)
    offsets = {}
    order = sorted(live.activations, key=lambda o: (-live.storage_bytes[o], live.intervals[o]))
    for owner in order:
        size = _aligned(live.storage_bytes[owner])
        first, last = live.intervals[owner]
        offset = 0
        busy = sorted((p for p in placed if p[2] <= last and first <= p[3]), key=lambda p: p[0])
        for p_off, p_size, _, _ in busy:
            if offset + size <= p_off:
                break
            offset = max(offset, p_off + p_size)
        placed.append((offset, size, first, last))
        offsets[owner] = offset
    return offsets


def make_plan(graph) -> MemoryPlan:
    live = liveness(graph)
    n = len(graph.nodes)
    free_after: list = [[] for _ in range(n)]
    for name, d in live.death.items():
        if 0 <= d < n:
            free_after[d].append(name)
    return MemoryPlan(live, free_after)


def plan_memory(graph):
    """A copy of ``graph`` carrying its memory plan (``graph.memory_plan``)."""
    out = graph.copy()
    out.memory_plan = make_plan(out)
    return out


class Slots:
    """A graph lowered to a flat list of slots, one per value, as the executors run it:
    ``steps`` holds per node (node, the slots it reads with -1 for an absent input, the slots it
    writes, the slots to release after it by the memory plan)."""

    __slots__ = ("n_slots", "input_slots", "fixed", "output_slots", "steps")

    def __init__(self, graph):
        slot: dict = {}
        for v in graph.values():
            slot.setdefault(v.name, len(slot))
        plan = plan_for(graph)
        self.n_slots = len(slot)
        self.input_slots = [slot[v.name] for v in graph.inputs]
        self.fixed = [(slot[name], name) for name in list(graph.parameters) + list(graph.constants)]
        self.output_slots = [slot[v.name] for v in graph.outputs]
        self.steps = [(node, tuple(-1 if v is None else slot[v.name] for v in node.inputs),
                       tuple(slot[v.name] for v in node.outputs),
                       tuple(slot[name] for name in plan.free_after[i]))
                      for i, node in enumerate(graph.nodes)]


def plan_for(graph) -> MemoryPlan:
    """The plan a run follows: the graph's own, or one made now (a GraphModule keeps the
    program built on it)."""
    return graph.memory_plan if graph.memory_plan is not None else make_plan(graph)
