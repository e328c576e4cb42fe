"""Walking a captured FX graph: the nodes a model's outputs depend on (the importer converts
those, and the complex lowering rewrites those)."""

from __future__ import annotations


def needed_nodes(graph, outputs) -> set:
    """Names of the FX nodes the model's outputs depend on."""
    import torch

    needed, stack = set(), [o for o in flat(outputs) if isinstance(o, torch.fx.Node)]
    while stack:
        node = stack.pop()
        if node.name in needed:
            continue
        needed.add(node.name)
        stack.extend(node.all_input_nodes)
    return needed


def flat(value) -> list:
    """The leaves of nested lists and tuples, in order."""
    if isinstance(value, (list, tuple)):
        return [leaf for v in value for leaf in flat(v)]
    return [value]


__all__ = ["needed_nodes", "flat"]
