"""Dead-code elimination: drop nodes whose outputs reach no graph output, and parameters and
constants that no remaining node reads. Graph inputs stay (they are the call's signature).
"""

from __future__ import annotations


def dce(graph, in_place: bool = False):
    """A copy of ``graph`` without dead nodes, parameters and constants (``in_place=True``:
    ``graph`` itself, for a graph nobody else holds yet, such as a fresh trace: copying every
    node of a million-node import doubled its peak memory).

    >>> import flopcount.runtime as rt
    >>> g = rt.trace(lambda x: (x.exp(), x + 1)[1], rt.randn(3))
    >>> [n.op_name for n in g.nodes], [n.op_name for n in dce(g).nodes]
    (['exp', 'add'], ['add'])
    """
    out = graph if in_place else graph.copy()
    needed = {v.name for v in out.outputs}
    kept = []
    for node in reversed(out.nodes):
        if any(v.name in needed for v in node.outputs):
            kept.append(node)
            needed.update(v.name for v in node.inputs if v is not None)
    kept.reverse()
    out.nodes = kept
    for table in (out.parameters, out.constants):
        for name in [n for n in table if n not in needed]:
            del table[name]
            del out.tensors[name]
    return out
