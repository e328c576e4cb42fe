"""Liveness: when each value is born and last used, which values share storage, and the peak
activation memory of running the graph in order.

Activations are the storages that nodes allocate. Graph inputs, parameters, buffers and
constants are held by someone else and are not counted. A view shares its input's storage, as
numpy and CuPy make it, so it costs nothing and keeps its source alive: each op says when its
output is one (``Op.view``: permute, expand and basic indexing always, reshape and contiguous of
a contiguous array). Temporaries inside a kernel are not modelled.

The walk itself (``StorageWalk``) knows nothing of graphs: it takes steps that read some values
and write others, so a recorded eager run (``recording.memory``) is measured by the same code.
"""

from __future__ import annotations

from ...registry import COPY, STRIDED


class Buffers:
    """Storages in the order they were written: parallel lists of size, first step, last step,
    whether autograd keeps them and the value that owns them (one list per field, not one object
    per storage: a model writes thousands)."""

    __slots__ = ("size", "start", "last", "saved", "owner")

    def __init__(self):
        self.size: list = []
        self.start: list = []
        self.last: list = []
        self.saved: list = []
        self.owner: list = []

    def add(self, size: int, start: int, last: int, saved: bool = False, owner=None) -> int:
        self.size.append(size)
        self.start.append(start)
        self.last.append(last)
        self.saved.append(saved)
        self.owner.append(owner)
        return len(self.size) - 1

    def live_per_step(self, steps: int) -> list:
        """Bytes alive while each of the first ``steps`` steps runs (a storage read past them
        counts to the end)."""
        delta = [0] * (steps + 2)
        for size, start, last in zip(self.size, self.start, self.last):
            delta[start] += size
            delta[min(last, steps) + 1] -= size
        live, out = 0, []
        for d in delta[:steps]:
            live += d
            out.append(live)
        return out


class StorageWalk:
    """Which storage each value lives in and when each storage is last read, step by step.

    A value the walk did not see written (an input, a parameter, a constant) is held outside the
    run: it has no storage unless ``hold_outside`` gave it one of 0 bytes.

    >>> import flopcount.runtime as rt
    >>> from flopcount.runtime.registry import get_op
    >>> walk, x, relu = StorageWalk(), rt.zeros(256), get_op("relu")
    >>> _ = walk.step(relu, {}, [("x", x)], [("y", x)])
    >>> _ = walk.step(relu, {}, [("y", x)], [("z", x)])
    >>> max(walk.buffers.live_per_step(walk.steps))  # y and z are alive together: 2 * 1 KiB
    2048
    """

    def __init__(self):
        self.buffers = Buffers()
        self.where: dict = {}       # value -> index of its storage
        self._strided: set = set()  # values that are views but not contiguous
        self.steps = 0

    def hold_outside(self, key) -> None:
        """Give ``key``, a value held outside the run, a storage of 0 bytes its views share."""
        self.where[key] = self.buffers.add(0, -1, -1, owner=key)

    def step(self, op, attrs: dict, inputs, outputs) -> list:
        """One op: ``inputs`` as (value, spec) pairs (value None: not tracked; spec None: an
        absent input), ``outputs`` as (value, spec) pairs. Returns the storages it read."""
        index = self.steps
        self.steps += 1
        where, last = self.where, self.buffers.last
        read = []
        for key, _ in inputs:
            if key is not None:
                b = where.get(key)
                if b is not None:
                    last[b] = index
                    read.append(b)
        alias = self._aliasing(op, attrs, inputs, outputs)
        if alias != COPY:  # a view: shares input 0's storage (none: held outside the run)
            base = where.get(inputs[0][0]) if inputs[0][0] is not None else None
            for key, _ in outputs:
                if base is not None:
                    where[key] = base
                else:
                    where.pop(key, None)
                if alias == STRIDED:
                    self._strided.add(key)
        else:
            for key, spec in outputs:
                where[key] = self.buffers.add(spec.dtype.nbytes(spec.numel()), index, index, owner=key)
        return read

    def _aliasing(self, op, attrs: dict, inputs, outputs) -> str:
        """COPY, VIEW or STRIDED: what the op's ``view`` rule says of its output (a value held
        outside the run counts as contiguous)."""
        rule = op.view
        if rule is None or not inputs or inputs[0][1] is None or len(outputs) != 1:
            return COPY
        return rule(inputs[0][0] not in self._strided, inputs[0][1], outputs[0][1], **attrs)

    def keep(self, keys, until: int) -> None:
        """Keep the storages of ``keys`` alive at least until step ``until``."""
        for key in keys:
            b = self.where.get(key)
            if b is not None:
                self.buffers.last[b] = max(self.buffers.last[b], until)


class Liveness:
    """Lifetimes of a graph's values, by name. Steps are node indices; -1 is "before the first
    node" (inputs, parameters, constants) and ``len(nodes)`` is "after the run" (outputs)."""

    def __init__(self, birth: dict, death: dict, walk: StorageWalk, outside: set):
        buffers = walk.buffers
        self.birth = birth                  # value name -> step that makes it
        self.death = death                  # value name -> last step that reads it
        owners = buffers.owner
        self.storage = {name: owners[b] for name, b in walk.where.items()}  # value -> storage owner
        self.storage_bytes = dict(zip(owners, buffers.size))  # storage owner -> bytes
        self.activations = set(owners) - outside  # storage owners that nodes allocate
        self.n_steps = n_steps = walk.steps
        self.intervals = {o: (s, e) for o, s, e in zip(owners, buffers.start, buffers.last)}
        self.live_bytes = buffers.live_per_step(n_steps + 1)  # activation bytes alive at each step
        self.peak_bytes = max(self.live_bytes, default=0)
        self.peak_step = self.live_bytes.index(self.peak_bytes) if self.live_bytes else 0

    def lifetime(self, name: str) -> tuple[int, int]:
        """(birth, last use) of a value."""
        return self.birth[name], self.death[name]

    def __repr__(self) -> str:
        return (f"Liveness(peak_bytes={self.peak_bytes}, peak_step={self.peak_step}, "
                f"values={len(self.birth)})")


def _pairs(values) -> list:
    return [(None, None) if v is None else (v.name, v.spec) for v in values]


def liveness(graph) -> Liveness:
    """Compute value lifetimes and the peak activation memory of ``graph``.

    >>> import flopcount.runtime as rt
    >>> g = rt.trace(lambda x: (x + 1).relu(), rt.zeros(256))
    >>> liveness(g).peak_bytes  # x + 1 and relu(...) are alive together: 2 * 1 KiB
    2048
    """
    n = len(graph.nodes)
    walk, birth, death = StorageWalk(), {}, {}
    outside = {v.name for v in list(graph.inputs) + list(graph.parameters.values())
               + list(graph.constants.values())}
    for name in outside:
        birth[name] = death[name] = -1
        walk.hold_outside(name)
    for i, node in enumerate(graph.nodes):
        for v in node.inputs:
            if v is not None:
                death[v.name] = i
        walk.step(node.op, node.attrs, _pairs(node.inputs), _pairs(node.outputs))
        for v in node.outputs:
            birth[v.name] = death[v.name] = i
    for v in graph.outputs:
        death[v.name] = n
    walk.keep([v.name for v in graph.outputs], n)
    return Liveness(birth, death, walk, outside)
