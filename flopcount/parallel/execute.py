"""Running a mesh of rank graphs in one process: the check that a plan computes what one device does.

Every rank's graph has the same nodes in the same order (the SBP pass decides from shapes, not
from the rank). ``run_mesh`` runs node i on every rank, then node i + 1: an ordinary op runs
through the dispatcher on each rank's tensors, a boxing node runs its ``collective`` over the
values of the ranks of its axis that share every other coordinate. ``split`` and ``join`` turn a
global array into the ranks' pieces under an SBP and back.

    >>> import numpy as np
    >>> from flopcount.runtime.sbp import S, P
    >>> parts = split(np.arange(6.0).reshape(2, 3), S(1, blocks=1), 3)
    >>> [p.tolist() for p in parts]
    [[[0.0], [3.0]], [[1.0], [4.0]], [[2.0], [5.0]]]
    >>> join(split(np.ones(2), P, 2), P).tolist()
    [1.0, 1.0]
"""

from __future__ import annotations

import itertools

import numpy as np

from ..runtime.device import CPU
from ..runtime.dispatch import apply, no_grad
from ..runtime.errors import ShapeError
from ..runtime.sbp import B, P, Split, slice_of
from ..runtime.tensor import Tensor
from .mesh import shard_step


def split(array: np.ndarray, sbp, n: int, seed: int = 0) -> list:
    """The ``n`` ranks' pieces of ``array`` under ``sbp``. A partial sum is split into random
    summands (not one rank holding it all), so a test sees every rank's part count."""
    if isinstance(sbp, Split):
        return [np.concatenate([np.take(array, np.arange(a, b), axis=sbp.dim)
                                for a, b in slice_of(array.shape[sbp.dim], sbp, n, r)], axis=sbp.dim)
                for r in range(n)]
    if sbp is P and array.dtype.kind == "f":
        rng = np.random.default_rng(seed)
        parts = [rng.standard_normal(array.shape).astype(array.dtype) for _ in range(n - 1)]
        return parts + [array - sum(parts, np.zeros_like(array))]
    return [array.copy() for _ in range(n)]


def join(parts: list, sbp, atol: float = 1e-9) -> np.ndarray:
    """The global array from the ranks' pieces under ``sbp`` (B: every rank must agree)."""
    if isinstance(sbp, Split):
        if sbp.blocks == 1:
            return np.concatenate(parts, axis=sbp.dim)
        chunks = [np.split(p, sbp.blocks, axis=sbp.dim) for p in parts]
        return np.concatenate([c[b] for b in range(sbp.blocks) for c in chunks], axis=sbp.dim)
    if sbp is P:
        return sum(parts[1:], parts[0].copy())
    for p in parts[1:]:
        if p.shape != parts[0].shape or not np.allclose(p, parts[0], atol=atol, rtol=1e-6):
            raise ShapeError("join: ranks holding a broadcast value disagree")
    return parts[0]


def split_nd(array: np.ndarray, sbps: tuple, sizes: tuple) -> dict:
    """Rank coordinates -> piece, splitting by each axis' SBP in turn (the pass's order)."""
    pieces = {(): array}
    for sbp, n in zip(sbps, sizes):
        pieces = {coord + (r,): part for coord, whole in pieces.items()
                  for r, part in enumerate(split(whole, sbp, n, seed=len(coord)))}
    return pieces


def join_nd(pieces: dict, sbps: tuple, sizes: tuple) -> np.ndarray:
    """The inverse of ``split_nd``: join along the last axis first."""
    for depth in range(len(sizes), 0, -1):
        sbp = sbps[depth - 1]
        merged = {}
        for coord in {c[:depth - 1] for c in pieces}:
            merged[coord] = join([pieces[coord + (r,)] for r in range(sizes[depth - 1])], sbp)
        pieces = merged
    return pieces[()]


def run_mesh(ranks: dict, axes: tuple, feeds: dict) -> dict:
    """Run every rank's graph. ``ranks``: coordinates -> rank graph (a Graph whose parameters
    and constants hold that rank's data); ``axes``: the mesh axis names, in coordinate order;
    ``feeds``: coordinates -> {input name: array}. Returns coordinates -> {value name: array}
    for every value of every rank."""
    coords = sorted(ranks)
    env = {c: {} for c in coords}
    for c in coords:
        g = ranks[c]
        for name in g.parameters:
            env[c][name] = g.tensors[name]
        for name in g.constants:  # a meta constant carries its (small) data: run it on the CPU
            t = g.tensors[name]
            env[c][name] = Tensor._make(t.data, t.shape, t.dtype, CPU) if t.device.type == "meta" else t
        for v in g.inputs:
            env[c][v.name] = Tensor._make(feeds[c][v.name], v.shape, v.dtype, CPU)
    first = ranks[coords[0]]
    with no_grad():
        for i, node in enumerate(first.nodes):
            if hasattr(node.op, "collective"):
                _run_collective(ranks, coords, list(axes).index(node.attrs["axis"]), env, i)
                continue
            for c in coords:
                n = ranks[c].nodes[i]
                args = [None if v is None else env[c][v.name] for v in n.inputs]
                out = apply(n.op, *args, **n.attrs)
                for v, t in zip(n.outputs, out if isinstance(out, tuple) else (out,)):
                    env[c][v.name] = t
    return {c: {k: (t.data if isinstance(t, Tensor) else t) for k, t in env[c].items()} for c in coords}


def _run_collective(ranks, coords, axis_pos: int, env, i) -> None:
    node = ranks[coords[0]].nodes[i]
    groups = {}
    for c in coords:
        groups.setdefault(c[:axis_pos] + c[axis_pos + 1:], []).append(c)
    for members in groups.values():
        members.sort(key=lambda c: c[axis_pos])
        xs = [env[c][ranks[c].nodes[i].inputs[0].name].data for c in members]
        attrs = {k: v for k, v in node.attrs.items() if k != "index"}
        outs = node.op.collective(np, xs, **attrs)
        for c, arr in zip(members, outs):
            v = ranks[c].nodes[i].outputs[0]
            env[c][v.name] = Tensor._make(np.ascontiguousarray(arr), v.shape, v.dtype, CPU)


def mesh_coords(sizes: tuple) -> list:
    """Every rank's coordinates on a mesh of ``sizes``."""
    return list(itertools.product(*[range(n) for n in sizes]))


def run_step_on_mesh(step, feeds: dict, data: int = 1, tensor: int = 1, sequence_parallel: bool = False) -> tuple:
    """A training step (``trace_training``) run on a data x tensor mesh of rank graphs, with the
    model's parameters sliced as the plan places them: (the model output, {parameter name:
    gradient}), joined back into global arrays (a partial gradient summed: the data-parallel
    gradient reduction). ``feeds`` maps every graph input (the output gradient included) to
    its global array.

    The result equals ``rt.GraphModule(step.graph)(...)`` run on one device, up to rounding: the check that
    the SBP pass and the boxing it inserts compute the same step."""
    sizes = tuple(n for n in (data, tensor) if n > 1) or (1,)
    names = tuple(a for a, n in (("dp", data), ("tp", tensor)) if n > 1) or ("dp",)
    coords = mesh_coords(sizes)
    ranks, infos, local_feeds = {}, {}, {}
    for c in coords:
        index = _index(c, data, tensor)
        info = shard_step(step, data=data, tensor=tensor, sequence_parallel=sequence_parallel, index=index)
        g = info.graph
        for name in list(g.parameters):
            whole = np.asarray(step.graph.tensors[name].data)
            g.tensors[name] = Tensor._make(split_nd(whole, _sbps(info.params[name], sizes), sizes)[c],
                                           g.parameters[name].shape, g.parameters[name].dtype, CPU)
        local_feeds[c] = {v.name: split_nd(np.asarray(feeds[v.name]), _sbps(info.sbp(v.name), sizes), sizes)[c]
                          for v in g.inputs}
        ranks[c], infos[c] = g, info
    values = run_mesh(ranks, names, local_feeds)
    first = infos[coords[0]]

    def joined(pick):
        return join_nd({c: values[c][pick(infos[c])] for c in coords}, _sbps(first.sbp(pick(first)), sizes), sizes)

    out = joined(lambda info: info.output)
    grads = {p: joined(lambda info, p=p: info.gradients[p]) for p in first.gradients}
    return out, grads


def _index(coord: tuple, data: int, tensor: int) -> tuple:
    it = iter(coord)
    return (next(it) if data > 1 else 0, next(it) if tensor > 1 else 0)


def _sbps(sbps: tuple, sizes: tuple) -> tuple:
    return sbps if sbps else (B,) * len(sizes)
