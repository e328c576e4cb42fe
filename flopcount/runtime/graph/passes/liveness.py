"""Liveness: when each value is born and last used, which values share storage, and the peak
activation memory of running the graph in order.

Activations are the storages that nodes allocate. Graph inputs, parameters, buffers and
constants are held by someone else and are not counted. A view shares its input's storage, as
numpy and CuPy make it, so it costs nothing and keeps its source alive: each op says when its
output is one (``Op.view``: permute, expand and basic indexing always, reshape and contiguous of
a contiguous array). Temporaries inside a kernel are not modelled.
"""

from __future__ import annotations

from ...registry import COPY, STRIDED


class Liveness:
    """Lifetimes of a graph's values, by name. Steps are node indices; -1 is "before the first
    node" (inputs, parameters, constants) and ``len(nodes)`` is "after the run" (outputs)."""

    def __init__(self, birth: dict, death: dict, storage: dict, storage_bytes: dict,
                 activations: set, n_steps: int):
        self.birth = birth                  # value name -> step that makes it
        self.death = death                  # value name -> last step that reads it
        self.storage = storage              # value name -> name of the value owning its storage
        self.storage_bytes = storage_bytes  # storage owner -> bytes
        self.activations = activations      # storage owners that nodes allocate
        self.n_steps = n_steps
        self.intervals = {}                 # storage owner -> (first step, last step) alive
        for name, owner in storage.items():
            b, d = self.intervals.get(owner, (birth[owner], birth[owner]))
            self.intervals[owner] = (b, max(d, death[name]))
        delta = [0] * (n_steps + 2)
        for owner in activations:
            b, d = self.intervals[owner]
            delta[b] += storage_bytes[owner]
            delta[d + 1] -= storage_bytes[owner]
        self.live_bytes, running = [], 0  # activation bytes alive while each step runs
        for i in range(n_steps + 1):
            running += delta[i]
            self.live_bytes.append(running)
        self.peak_bytes = max(self.live_bytes, default=0)
        self.peak_step = self.live_bytes.index(self.peak_bytes) if self.live_bytes else 0

    def lifetime(self, name: str) -> tuple[int, int]:
        """(birth, last use) of a value."""
        return self.birth[name], self.death[name]

    def __repr__(self) -> str:
        return (f"Liveness(peak_bytes={self.peak_bytes}, peak_step={self.peak_step}, "
                f"values={len(self.birth)})")


def aliasing(node, contiguous: dict) -> str:
    """COPY, VIEW or STRIDED: what the op's ``view`` rule says of the node's output, given
    whether each value is contiguous (``contiguous``, by name)."""
    rule = node.op.view
    src = node.inputs[0] if node.inputs else None
    if rule is None or src is None or len(node.outputs) != 1:
        return COPY
    return rule(contiguous[src.name], src.spec, node.outputs[0].spec, **node.attrs)


def liveness(graph) -> Liveness:
    """Compute value lifetimes and the peak activation memory of ``graph``.

    >>> import flopcount.runtime as rt
    >>> g = rt.trace(lambda x: (x + 1).relu(), rt.zeros(256))
    >>> liveness(g).peak_bytes  # x + 1 and relu(...) are alive together: 2 * 1 KiB
    2048
    """
    n = len(graph.nodes)
    birth, death, storage, contiguous = {}, {}, {}, {}
    for v in list(graph.inputs) + list(graph.parameters.values()) + list(graph.constants.values()):
        birth[v.name] = death[v.name] = -1
        storage[v.name] = v.name
        contiguous[v.name] = True
    storage_bytes = {}
    activations = set()
    for i, node in enumerate(graph.nodes):
        for v in node.inputs:
            if v is not None:
                death[v.name] = i
        alias = aliasing(node, contiguous)
        for v in node.outputs:
            birth[v.name] = death[v.name] = i
            if alias != COPY:
                storage[v.name] = storage[node.inputs[0].name]
                contiguous[v.name] = alias != STRIDED
            else:
                storage[v.name] = v.name
                contiguous[v.name] = True
                storage_bytes[v.name] = v.nbytes
                activations.add(v.name)
    for v in graph.outputs:
        death[v.name] = n
    for owner in set(storage.values()) - activations:
        storage_bytes[owner] = 0  # held outside the run
    return Liveness(birth, death, storage, storage_bytes, activations, n)
