"""Fusion of elementwise chains into one ``fused_elementwise`` node.

A chain grows while a node's result has exactly one reader, that reader is a fusable
elementwise op, and the result is not a graph output. Each fused node keeps the chain's last
output value, so the rest of the graph is unchanged. Only floating chains of one dtype whose
output has the broadcast shape of its inputs are fused (the in-place kernel relies on it).
"""

from __future__ import annotations

import numpy as np

from ..fused import FUSABLE, FusedElementwise, normalize_steps
from ..ir import Node


def _fusable(node) -> bool:
    if node.op.name not in FUSABLE or len(node.outputs) != 1 or not node.inputs:
        return False
    out = node.outputs[0]
    if not out.dtype.is_floating_point or any(v is None or v.dtype is not out.dtype for v in node.inputs):
        return False
    try:
        return tuple(np.broadcast_shapes(*(v.shape for v in node.inputs))) == out.shape
    except ValueError:
        return False


def _common_scope(scopes: list) -> str:
    parts = [s.split(".") if s else [] for s in scopes]
    common = []
    for level in zip(*parts):
        if len(set(level)) != 1:
            break
        common.append(level[0])
    return ".".join(common)


def _fuse(group: list) -> Node:
    external, index = [], {}
    local = {}  # value name -> arg code of the step that makes it
    steps = []
    for k, node in enumerate(group):
        args = []
        for v in node.inputs:
            if v.name in local:
                args.append(local[v.name])
                continue
            if v.name not in index:
                index[v.name] = len(external)
                external.append(v)
            args.append(index[v.name])
        steps.append((node.op.name, tuple(args), dict(node.attrs)))
        local[node.outputs[0].name] = -1 - k
    scopes = [n.scope for n in group]
    same = len(set(scopes)) == 1 and len({n.module_type for n in group}) == 1
    return Node(FusedElementwise, external, [group[-1].outputs[0]], {"steps": normalize_steps(steps)},
                scopes[0] if same else _common_scope(scopes), group[0].module_type if same else "")


def fuse_elementwise(graph, across_scopes: bool = True, min_length: int = 2):
    """A copy of ``graph`` with elementwise chains of at least ``min_length`` ops fused.

    With ``across_scopes=False`` a chain stays inside one module scope (per-module attribution
    is then unchanged); otherwise a fused node takes the common dotted prefix of its scopes.

    >>> import flopcount.runtime as rt
    >>> g = rt.trace(lambda x, y: (x * y + 1.0).relu(), rt.randn(4), rt.randn(4))
    >>> [n.op_name for n in fuse_elementwise(g).nodes]
    ['fused_elementwise']
    """
    out = graph.copy()
    users = out.users()
    outputs = {v.name for v in out.outputs}
    groups: list = []
    open_tail: dict = {}  # value name -> the group whose last node makes it
    for node in out.nodes:
        if not _fusable(node):
            continue
        group = None
        for v in node.inputs:
            g = open_tail.get(v.name)
            if (g is not None and len(users.get(v.name, ())) == 1 and v.name not in outputs
                    and (across_scopes or g[-1].scope == node.scope)):
                group = g
                del open_tail[v.name]
                break
        if group is None:
            group = []
            groups.append(group)
        group.append(node)
        open_tail[node.outputs[0].name] = group
    fused_at = {}  # id(last node of a group) -> its fused node
    absorbed = set()
    for group in groups:
        if len(group) >= min_length:
            fused_at[id(group[-1])] = _fuse(group)
            absorbed.update(id(n) for n in group)
    out.nodes = [fused_at.get(id(n), n) for n in out.nodes if id(n) not in absorbed or id(n) in fused_at]
    return out

