"""``with_dtype``: a graph whose floating values all take one dtype.

A training plan counts a model as mixed-precision training runs it: every activation, weight
and gradient in bfloat16 (or float16), whatever dtype the model was built in; the float32
copies the optimizer keeps are priced apart. Retyping the traced graph is simpler and more
uniform than building the model in that dtype (a constant made in float32, such as an additive
attention mask, would otherwise promote the scores it is added to).

    >>> import flopcount.runtime as rt
    >>> g = with_dtype(rt.trace(rt.nn.Linear(4, 2), rt.randn(3, 4)), rt.bfloat16)
    >>> [v.dtype.name for v in g.values()]
    ['bfloat16', 'bfloat16', 'bfloat16', 'bfloat16']
"""

from __future__ import annotations

import numpy as np

from ... import dtypes as _dt
from ...tensor import Tensor
from ..ir import Graph, Node, Value


def with_dtype(graph: Graph, dtype) -> Graph:
    """A copy of ``graph`` with every floating input, parameter, constant and node output in
    ``dtype`` (and every cast to a floating type casting to it); others keep their dtype. The
    shape rules are re-run, so an op that cannot take ``dtype`` says so."""
    dtype = _dt.get_dtype(dtype)
    out = graph.copy()
    new: dict = {}

    def retyped(v: Value | None):
        if v is None:
            return None
        if v.name not in new:
            new[v.name] = Value(v.name, v.shape, dtype, v.kind) if v.dtype.is_floating_point else v
        return new[v.name]

    out.inputs = [retyped(v) for v in graph.inputs]
    out.parameters = {name: retyped(v) for name, v in graph.parameters.items()}
    out.constants = {name: retyped(v) for name, v in graph.constants.items()}
    for name, v in list(out.parameters.items()) + list(out.constants.items()):
        out.tensors[name] = _tensor_as(graph.tensors[name], v.dtype)
    nodes = []
    for node in graph.nodes:
        attrs = dict(node.attrs)
        if "dtype" in attrs and attrs["dtype"] is not None and _dt.get_dtype(attrs["dtype"]).is_floating_point:
            attrs["dtype"] = dtype.name
        nodes.append(Node(node.op, [retyped(v) for v in node.inputs], [retyped(v) for v in node.outputs],
                          attrs, node.scope, node.module_type, node.source))
    out.nodes = nodes
    out.outputs = [retyped(v) for v in graph.outputs]
    out.validate()
    return out


def _tensor_as(t: Tensor, dtype) -> Tensor:
    if t.dtype is dtype:
        return t
    data = None if t.data is None else np.asarray(t.data).astype(dtype.np)
    return Tensor._make(data, t.shape, dtype, t.device)
