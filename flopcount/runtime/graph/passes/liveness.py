"""Liveness: when each value is born and last used, which values share storage, and the peak
activation memory of running the graph in order.

Activations are the storages that nodes allocate. Graph inputs, parameters, buffers and
constants are held by someone else and are not counted. A view (reshape of a contiguous array,
permute, expand, basic indexing) shares its input's storage, as numpy and CuPy do, so it costs
nothing and keeps its source alive. Temporaries inside a kernel are not modelled.
"""

from __future__ import annotations

# Ops whose output is a view of their first input (no new storage).
_ALWAYS_VIEW = {"permute", "expand", "getitem"}
# Ops that are a view when their input is contiguous and a copy otherwise (numpy's rule).
_VIEW_IF_CONTIGUOUS = {"reshape", "contiguous"}


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


def _is_view(node, contiguous: dict) -> bool:
    name = node.op.name
    src = node.inputs[0] if node.inputs else None
    if src is None or len(node.outputs) != 1:
        return False
    if name in _ALWAYS_VIEW:
        return True
    if name == "contiguous" and node.attrs.get("force_copy"):
        return False
    if name == "reshape" and _only_unit_dims_change(src.shape, node.outputs[0].shape):
        return True  # adding or dropping size-1 dims is a view whatever the strides
    return name in _VIEW_IF_CONTIGUOUS and contiguous[src.name]


def _only_unit_dims_change(a: tuple, b: tuple) -> bool:
    return [d for d in a if d != 1] == [d for d in b if d != 1]


def _output_contiguous(node, view: bool, src_contiguous: bool) -> bool:
    name = node.op.name
    if not view:
        return True
    if name in ("permute", "expand"):
        return False
    if name == "getitem":  # integers, then one unit-step slice, then whole dims stay contiguous
        partial = False
        for item in node.attrs.get("items", ()):
            if item[0] == "n":
                continue
            if partial and not (item[0] == "s" and item[3] == 1 and item[1] == 0):
                return False
            if item[0] == "s":
                if item[3] != 1:
                    return False
                partial = True
        return src_contiguous
    return src_contiguous


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
        view = _is_view(node, contiguous)
        for v in node.outputs:
            birth[v.name] = death[v.name] = i
            if view:
                src = node.inputs[0]
                storage[v.name] = storage[src.name]
                contiguous[v.name] = _output_contiguous(node, True, contiguous[src.name])
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
