"""Whether two graphs are the same computation, node by node, whatever their value names.

Two graphs are equal when their nodes run the same ops in the same order, in the same module
scopes, with the same attrs, output shapes and dtypes, and read the same things: the same graph
input (by position), parameter or buffer (by name and kind), node output (by node and output
position) or a constant of the same shape and dtype; and their outputs are the same values.
Value names do not matter (a trace names values after ops, an importer after the file).

    >>> import flopcount.runtime as rt
    >>> net, x = rt.nn.Linear(4, 2), rt.randn(3, 4)
    >>> first_difference(rt.trace(net, x), rt.trace(net, x)) is None
    True
    >>> print(first_difference(rt.trace(net, x), rt.trace(lambda t: net(t).relu(), x)))
    node 1: the first graph has no node, the second graph has relu in scope '' reading [('node', 0, 0)], making [((3, 2), 'float32')], attrs []
"""

from __future__ import annotations


def node_keys(graph) -> tuple:
    """(one key per node, the outputs' keys): what :func:`first_difference` compares."""
    where: dict = {}
    for i, v in enumerate(graph.inputs):
        where[v.name] = ("input", i)
    for v in graph.parameters.values():
        where[v.name] = (v.kind, v.name)

    def key_of(v):
        if v is None:
            return None
        found = where.get(v.name)
        return found if found is not None else ("const", v.shape, v.dtype.name)

    keys = []
    for i, n in enumerate(graph.nodes):
        keys.append((n.op_name, n.scope, n.module_type, tuple(key_of(v) for v in n.inputs),
                     tuple((v.shape, v.dtype.name) for v in n.outputs), repr(sorted(n.attrs.items()))))
        for j, v in enumerate(n.outputs):
            where[v.name] = ("node", i, j)
    return keys, [key_of(v) for v in graph.outputs]


def first_difference(a, b) -> str | None:
    """None when graphs ``a`` and ``b`` are equal node by node; else one line naming the first
    node (or the outputs) where they differ."""
    (nodes_a, outs_a), (nodes_b, outs_b) = node_keys(a), node_keys(b)
    for i in range(max(len(nodes_a), len(nodes_b))):
        ka = nodes_a[i] if i < len(nodes_a) else None
        kb = nodes_b[i] if i < len(nodes_b) else None
        if ka != kb:
            return f"node {i}: {_say(ka, 'first')}, {_say(kb, 'second')}"
    if outs_a != outs_b:
        return f"outputs: the first graph returns {outs_a}, the second {outs_b}"
    return None


def _say(key, which: str) -> str:
    if key is None:
        return f"the {which} graph has no node"
    op, scope, module_type, inputs, outputs, attrs = key
    return (f"the {which} graph has {op} in scope {scope!r}" + (f" ({module_type})" if module_type else "")
            + f" reading {list(inputs)}, making {list(outputs)}, attrs {attrs}")
