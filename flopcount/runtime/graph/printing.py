"""Readable text for a graph: one line per value or node, torch.fx / OneFlow style.

    graph Net(%x: float32[2, 4]):
      param %fc.weight: float32[3, 4]
      param %fc.bias: float32[3]
      %linear: float32[2, 3] = linear(%x, %fc.weight, %fc.bias)  # fc: Linear
      %relu: float32[2, 3] = relu(%linear)  # Net
      return %relu
"""

from __future__ import annotations

import numpy as np

from .tree import unflatten

_SHOW_CONSTANT_UP_TO = 6  # elements; larger constants print their type only


def type_str(shape: tuple, dtype) -> str:
    """``float32[2, 4]``: how printing and error messages show a value's type."""
    return f"{dtype.name}[{', '.join(str(s) for s in shape)}]"


class _Raw(str):
    """A string that prints without quotes (value names inside a returned tuple)."""

    def __repr__(self) -> str:
        return str(self)


def format_node(node) -> str:
    """``%out: float32[2, 3] = op(%a, %b, attr=1)  # scope: Type``."""
    outs = ", ".join(f"%{v.name}: {type_str(v.shape, v.dtype)}" for v in node.outputs)
    if len(node.outputs) > 1:
        outs = f"({outs})"
    args = ["None" if v is None else f"%{v.name}" for v in node.inputs]
    args += [f"{k}={v!r}" for k, v in node.attrs.items()]
    line = f"{outs} = {node.op_name}({', '.join(args)})"
    where = _where(node.scope, node.module_type)
    return f"{line}  # {where}" if where else line


def node_summary(node) -> str:
    """``%out = op(%a, %b) in layer1.0.conv1 (Conv2d)``: a node as an error names it."""
    outs = ", ".join(f"%{v.name}" for v in node.outputs)
    args = ", ".join("None" if v is None else f"%{v.name}" for v in node.inputs)
    where = node.scope or "the top level"
    return f"{outs} = {node.op_name}({args}) in {where}" + (f" ({node.module_type})" if node.module_type else "")


def _where(scope: str, module_type: str) -> str:
    if scope and module_type:
        return f"{scope}: {module_type}"
    return scope or module_type


def _constant_text(tensor) -> str:
    data = tensor.data
    if data is None or tensor.numel() > _SHOW_CONSTANT_UP_TO:
        return ""
    arr = np.asarray(data.get() if hasattr(data, "get") else data)
    return f" = {arr.tolist()!r}"


def format_graph(graph) -> str:
    """The whole graph: signature, parameters, constants, nodes, return."""
    sig = ", ".join(f"%{v.name}: {type_str(v.shape, v.dtype)}" for v in graph.inputs)
    lines = [f"graph {graph.name}({sig}):"]
    for v in graph.parameters.values():
        lines.append(f"  {v.kind} %{v.name}: {type_str(v.shape, v.dtype)}")
    for v in graph.constants.values():
        lines.append(f"  const %{v.name}: {type_str(v.shape, v.dtype)}{_constant_text(graph.tensors[v.name])}")
    for n in graph.nodes:
        lines.append(f"  {format_node(n)}")
    names = [_Raw(f"%{v.name}") for v in graph.outputs]
    ret = unflatten(graph.output_tree, names)
    lines.append(f"  return {ret!r}" if not isinstance(ret, _Raw) else f"  return {ret}")
    return "\n".join(lines)
