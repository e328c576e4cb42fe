"""Where each op's bytes come from: weights, the KV cache, or activations.

Every value of a traced step has an origin. Parameters are *weights*; what ``cache_append``
writes (the cache after the step) and what it appends to (the cache before it) is the *KV
cache*, and so are the states a step reads and leaves (a recurrent layer's, named by the
tracer); everything else is an *activation*. A view (an op that moves no bytes and computes
nothing: reshape, transpose, expand, basic indexing) keeps its input's origin, so an expert's
slice of a stacked weight is still a weight and a key transposed for QKᵀ is still the cache.

An op's bytes read (its cost rule's) are split by the origins of its inputs: the activation
inputs read their size, and the rest of the bytes go to the weight and cache inputs in
proportion to theirs. That is exact for every op that reads whole inputs, and for a gather
(an embedding reads only the picked rows of its table) it gives the rows to the table.
"""

from __future__ import annotations

from dataclasses import dataclass

WEIGHT, KV, ACTIVATION = "weight", "kv", "activation"


@dataclass
class Traffic:
    """One node's bytes by origin."""

    weight_read: int = 0
    kv_read: int = 0
    kv_written: int = 0
    activation_read: int = 0
    activation_written: int = 0


def origins(graph, cache_values=()) -> dict:
    """{value name: WEIGHT, KV or ACTIVATION} for every value the nodes read or write.
    ``cache_values`` names values that are cache besides ``cache_append``'s: the state a step
    reads (graph inputs) and leaves (graph outputs), such as a recurrent layer's."""
    origin = {name: WEIGHT for name, v in graph.parameters.items() if v.kind == "param"}
    origin.update(dict.fromkeys(cache_values, KV))
    for node in graph.nodes:
        cost = node.cost()
        if node.op_name == "cache_append":
            cached = node.inputs[0]
            origin[cached.name] = KV
            origin[node.outputs[0].name] = KV
        elif cost.flops == 0 and cost.bytes_read == 0 and cost.bytes_written == 0 and node.inputs \
                and node.inputs[0] is not None:
            for v in node.outputs:  # a view: the bytes it stands for are its input's
                if v.name not in cache_values:
                    origin[v.name] = origin.get(node.inputs[0].name, ACTIVATION)
    return origin


def state_written(node, cache_values, origin: dict) -> int:
    """Bytes a node stores into the cache that its cost rule does not write: a state the step
    leaves that the runtime holds as a view of an activation computed before (a copy into the
    cache, which the runtime elides). A view of the cache itself (a sliding window's kept
    positions) writes nothing."""
    if node.cost().bytes_written or not node.inputs or node.inputs[0] is None \
            or origin.get(node.inputs[0].name) == KV:
        return 0
    return sum(v.nbytes for v in node.outputs if v.name in cache_values)


def node_traffic(node, origin: dict) -> Traffic:
    """``node``'s bytes read and written, split by origin (see the module docstring)."""
    cost = node.cost()
    sizes = {WEIGHT: 0, KV: 0, ACTIVATION: 0}
    for v in node.inputs:
        if v is not None:
            sizes[origin.get(v.name, ACTIVATION)] += v.nbytes
    rest = max(cost.bytes_read - sizes[ACTIVATION], 0)
    special = sizes[WEIGHT] + sizes[KV]
    weight_read = rest * sizes[WEIGHT] // special if special else 0
    kv_read = rest - weight_read if special else 0
    kv_out = any(origin.get(v.name) == KV for v in node.outputs)
    return Traffic(weight_read=weight_read, kv_read=kv_read,
                   kv_written=cost.bytes_written if kv_out else 0,
                   activation_read=cost.bytes_read - weight_read - kv_read,
                   activation_written=0 if kv_out else cost.bytes_written)
