"""One step of a phase (a prefill, or one decode step), traced and counted op by op.

The decoder (``decoders.py``) is traced on the phase's inputs (on meta: shapes only, no memory). Each
node gets its MACs and FLOPs (the op's cost rule, flopcount convention) and its bytes split by
origin (``traffic.py``): weights read, KV cache read and written, activations. Nodes roll up to
groups: each decoder layer (``model.layers.3``), and the modules outside the layers
(``model.embed_tokens``, ``model.norm``, ``lm_head``).

Memory after the step: the weights, the KV cache the step returns, and the peak of the
activations alive at once (the graph's liveness, the cache's storage left out since it is
counted as the cache).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..runtime.graph.passes import liveness
from .cache import cache_bytes
from .traffic import KV, node_traffic, origins, state_written

COUNTS = ("macs", "flops", "weight_read", "kv_read", "kv_written", "activation_read", "activation_written")


@dataclass
class Counts:
    """What an op, a group of ops or a whole step costs: MACs, FLOPs, and bytes by origin."""

    macs: int = 0
    flops: int = 0
    weight_read: int = 0
    kv_read: int = 0
    kv_written: int = 0
    activation_read: int = 0
    activation_written: int = 0

    @property
    def bytes_read(self) -> int:
        return self.weight_read + self.kv_read + self.activation_read

    @property
    def bytes_written(self) -> int:
        return self.kv_written + self.activation_written

    @property
    def bytes(self) -> int:
        """Bytes moved: read and written."""
        return self.bytes_read + self.bytes_written

    @property
    def intensity(self) -> float | None:
        """Arithmetic intensity: FLOPs per byte moved (None when nothing moved)."""
        return self.flops / self.bytes if self.bytes else None

    def add(self, other: "Counts", times: int = 1) -> None:
        for name in COUNTS:
            setattr(self, name, getattr(self, name) + times * getattr(other, name))

    def counts(self) -> dict:
        return {name: getattr(self, name) for name in COUNTS}


@dataclass
class OpCost(Counts):
    """One node of the step: its name (``scope/value``), op, module scope, group and output shape."""

    name: str = ""
    op: str = ""
    scope: str = ""
    group: str = ""
    shape: tuple = ()


@dataclass
class GroupCost(Counts):
    """A decoder layer, or a module outside the layers."""

    name: str = ""
    ops: int = 0


@dataclass
class StepCost:
    """A traced step: per op, per group, in total, and the memory it needs."""

    phase: object
    batch: int
    dtype: str
    queries: int                # new tokens per sequence
    context: int                # cached positions before the step
    ops: list = field(default_factory=list)
    groups: list = field(default_factory=list)
    total: Counts = field(default_factory=Counts)
    params: int = 0
    weight_bytes: int = 0       # every parameter, at its dtype
    kv_cache_bytes: int = 0     # the cache the step returns
    activation_peak: int = 0    # activations alive at once, the cache's storage left out
    routing: list = field(default_factory=list)   # with the real MoE routing: (layer, expert per (token, choice))

    @property
    def peak_memory(self) -> int:
        """Weights, the cache after the step and the activation peak."""
        return self.weight_bytes + self.kv_cache_bytes + self.activation_peak

    def group(self, name: str) -> GroupCost:
        for g in self.groups:
            if g.name == name:
                return g
        raise KeyError(name)


def group_of(scope: str, layers: str | None) -> str:
    """``model.layers.3.mlp.up_proj`` -> ``model.layers.3``; outside the layers, the module at the
    layers' depth (``model.embed_tokens``, ``model.norm``), or the top-level module (``lm_head``)."""
    if not scope:
        return "(top level)"
    parts = scope.split(".")
    if layers is not None:
        depth = layers.count(".") + 1
        if scope.startswith(layers + "."):
            return ".".join(parts[:depth + 1])
        return ".".join(parts[:depth])
    return parts[0]


def grouped(ops: list) -> tuple[list, Counts]:
    """The groups of ``ops`` (``GroupCost``, in the order they first appear) and their total."""
    groups: dict = {}
    total = Counts()
    for op in ops:
        group = groups.setdefault(op.group, GroupCost(name=op.group))
        group.add(op)
        group.ops += 1
        total.add(op)
    return list(groups.values()), total


def count_step(decoder, traced, phase, batch: int, kv_bits: int | None = None) -> StepCost:
    """Count a traced step (a ``StepGraph``) of ``decoder`` (see the module docstring). With
    ``kv_bits``, the cache is stored at that many bits per value (``--kv-dtype``): its bytes
    read and written are the traced ones scaled from the model's dtype (a recurrent state's
    traffic too, which engines keep at its own dtype: an approximation for state-space layers),
    and the cache after the step is the layers' positions at that dtype plus their states."""
    graph = traced.graph
    dtype = decoder.dtype
    queries = phase.tokens if hasattr(phase, "tokens") else 1
    step = StepCost(phase=phase, batch=batch, dtype=dtype.name, queries=queries,
                    context=getattr(phase, "context", 0))
    layers = decoder.layer_path
    origin = origins(graph, traced.cache_values)
    scale = kv_bits / dtype.bits if kv_bits is not None else 1
    for node in graph.nodes:
        cost = node.cost()
        traffic = node_traffic(node, origin)
        traffic.kv_written += state_written(node, traced.cache_values, origin)
        if scale != 1:
            traffic.kv_read, traffic.kv_written = int(traffic.kv_read * scale), int(traffic.kv_written * scale)
        op = OpCost(macs=cost.macs, flops=cost.flops, name=f"{node.scope}/{node.name}", op=node.op_name,
                    scope=node.scope, group=group_of(node.scope, layers), shape=node.outputs[0].shape,
                    **vars(traffic))
        step.ops.append(op)
    step.groups, step.total = grouped(step.ops)
    step.params = decoder.params
    step.weight_bytes = decoder.weight_bytes
    kv_outputs = {v.name: v for v in graph.outputs if origin.get(v.name) == KV}
    step.kv_cache_bytes = sum(v.nbytes for v in kv_outputs.values())
    if kv_bits is not None:   # the positions at the cache's dtype, a recurrent state at its own
        step.kv_cache_bytes = int(cache_bytes(decoder.layers, step.context + queries, batch, kv_bits / 8))
    step.activation_peak = _activation_peak(graph, origin)
    step.routing = list(traced.routing)
    return step


def _activation_peak(graph, origin: dict) -> int:
    """The most activation bytes alive at once, leaving out storages that are the KV cache."""
    live = liveness(graph)
    owners = [o for o in live.activations if origin.get(o) != KV]
    delta = [0] * (live.n_steps + 2)
    for owner in owners:
        first, last = live.intervals[owner]
        delta[first] += live.storage_bytes[owner]
        delta[last + 1] -= live.storage_bytes[owner]
    peak = running = 0
    for change in delta:
        running += change
        peak = max(peak, running)
    return peak


__all__ = ["Counts", "OpCost", "GroupCost", "StepCost", "count_step", "group_of"]
