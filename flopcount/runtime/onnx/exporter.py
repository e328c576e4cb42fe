"""``export(module_or_graph, path, *example_inputs, opset=17)``: a runtime graph as an ONNX file.

A Module is traced first (``rt.trace``); every node of the graph then goes through its op's
emitter (``emitters/``), which writes one or a few ONNX nodes, or, for an op that names its
ONNX operator (``Op.onnx``), that one node. Parameters
and buffers become initializers under their graph names; node names carry the
module scope as the TorchScript exporter writes it (``/layer1/0/conv1/Conv``), so importing the
file back gives the same scopes; graph constants (masks, index tables) are Constant nodes, so
they import back as constants, not weights. The IR version is the lowest the opset needs, which the
installed onnxruntime accepts, and ``onnx.checker`` validates the file.
"""

from __future__ import annotations

import os

import numpy as np

from ..errors import FlopcountError, UnsupportedOpError
from ..graph.ir import Graph
from ..graph.trace import trace
from .elem_types import from_dtype

OPSETS = range(13, 21)  # the opsets the emitters are written for
# above this many bytes of weights the tensors go to a side file (protobuf's limit is 2 GiB)
EXTERNAL_DATA_BYTES = 1 << 30


class Builder:
    """Collects the ONNX nodes and initializers of one export; emitters call its methods."""

    def __init__(self, graph: Graph, opset: int):
        self.graph = graph
        self.opset = opset
        self.nodes: list = []
        self.initializers: list = []
        self.scope = ""
        self._taken = {v.name for v in graph.values()}
        self._counts: dict = {}
        self._node_names: set = set()

    def fresh(self, base: str) -> str:
        """A value name used nowhere else in the model."""
        k = self._counts.get(base, 0)
        name = base if k == 0 else f"{base}_{k}"
        while name in self._taken:
            k += 1
            name = f"{base}_{k}"
        self._counts[base] = k + 1
        self._taken.add(name)
        return name

    def initializer(self, name: str, array) -> str:
        from onnx import numpy_helper

        array = np.asarray(array)
        if not array.flags.c_contiguous:  # (np.ascontiguousarray would make a 0-d array 1-d)
            array = array.copy()
        self.initializers.append(numpy_helper.from_array(array, name))
        return name

    def const(self, array, base: str = "const") -> str:
        """A new initializer holding ``array``; returns its name."""
        return self.initializer(self.fresh(base), np.asarray(array))

    def ints(self, values) -> str:
        return self.const(np.array(list(values), dtype=np.int64), "ints")

    def scalar(self, value, dtype) -> str:
        return self.const(np.array(value, dtype=dtype.np), "scalar")

    def _node_name(self, op_type: str) -> str:
        path = "/".join(self.scope.split(".")) if self.scope else ""
        base = f"/{path}/{op_type}" if path else f"/{op_type}"
        name, k = base, 0
        while name in self._node_names:
            k += 1
            name = f"{base}_{k}"
        self._node_names.add(name)
        return name

    def add(self, op_type: str, inputs: list, outputs=None, n_outputs: int = 1, **attrs):
        """Append one node; ``outputs`` names its results (fresh names by default). Returns
        the output name, or the list of names when there are several."""
        from onnx import helper

        if outputs is None:
            outputs = [self.fresh(op_type.lower()) for _ in range(n_outputs)]
        attrs = {k: v for k, v in attrs.items() if v is not None}
        self.nodes.append(helper.make_node(op_type, ["" if i is None else i for i in inputs], list(outputs),
                                           name=self._node_name(op_type), **attrs))
        return outputs[0] if len(outputs) == 1 else list(outputs)

    def cast(self, name: str, src, dst) -> str:
        """``name`` converted from dtype ``src`` to ``dst`` (itself when they are the same)."""
        if src is dst:
            return name
        return self.add("Cast", [name], to=from_dtype(dst))


def _value_info(value):
    from onnx import helper

    return helper.make_tensor_value_info(value.name, from_dtype(value.dtype), list(value.shape))


def _tensor_array(graph: Graph, name: str) -> np.ndarray:
    t = graph.tensors[name]
    if t.data is None:
        raise FlopcountError(f"export: {name!r} is a meta tensor with no data; build the model on "
                             f"a real device to export its weights")
    return np.asarray(t.data) if t.device.type in ("cpu", "meta") else t.numpy()


def to_model(graph: Graph, opset: int = 17):
    """The ONNX ModelProto of ``graph``."""
    from onnx import helper, numpy_helper

    from .emitters import emitter_for

    if opset not in OPSETS:
        raise ValueError(f"export: opset must be in {OPSETS.start}..{OPSETS.stop - 1}, got {opset}")
    missing = sorted({n.op_name for n in graph.nodes if emitter_for(n.op_name) is None})
    if missing:
        raise UnsupportedOpError(f"export: no ONNX emitter for runtime op(s) {missing}")
    b = Builder(graph, opset)
    read = {v.name for n in graph.nodes for v in n.inputs if v is not None} | {v.name for v in graph.outputs}
    for name in graph.parameters:
        if name in read:  # unused buffers (a batch norm's step counter) stay out of the file
            b.initializer(name, _tensor_array(graph, name))
    for name in graph.constants:  # Constant nodes, so that importing keeps them apart from weights
        if name in read:
            b.add("Constant", [], [name], value=numpy_helper.from_array(_tensor_array(graph, name).copy()))
    for node in graph.nodes:
        b.scope = node.scope
        ins = [None if v is None else v.name for v in node.inputs]
        emitter_for(node.op_name)(b, node, ins, [v.name for v in node.outputs])
    b.scope = ""
    outputs, seen = [], set()
    produced = {v.name for n in graph.nodes for v in n.outputs}
    for v in graph.outputs:
        name = v.name
        if name in seen or name not in produced:  # an output must be a distinct node result
            name = b.add("Identity", [v.name])
        seen.add(name)
        outputs.append(helper.make_tensor_value_info(name, from_dtype(v.dtype), list(v.shape)))
    onnx_graph = helper.make_graph(b.nodes, graph.name or "graph", [_value_info(v) for v in graph.inputs],
                                   outputs, b.initializers)
    opset_ids = [helper.make_opsetid("", opset)]
    return helper.make_model(onnx_graph, opset_imports=opset_ids, producer_name="flopcount",
                             ir_version=helper.find_min_ir_version_for(opset_ids))


def export(module_or_graph, path, *example_inputs, opset: int = 17) -> None:
    """Write ``module_or_graph`` to ``path`` as an ONNX model.

    A Module (or ``rt.compile(module)``) is traced on ``example_inputs`` (``export(m, p, x)`` or,
    as ``torch.onnx.export`` takes them, ``export(m, p, (x, y))``); a Graph is written as it is.
    Weights above 1 GiB go to ``path + ".data"`` next to the model.

    >>> rt.onnx.export(rt.nn.Linear(4, 2), "linear.onnx", rt.randn(3, 4))  # doctest: +SKIP
    """
    from .model import onnx_package

    onnx = onnx_package()  # one line saying what to install, rather than a ModuleNotFoundError

    from ..graph.executor import GraphModule
    from ..graph.lazy import LazyGraph

    graph = module_or_graph.graph if isinstance(module_or_graph, GraphModule) else module_or_graph
    if not isinstance(graph, Graph):
        target = graph.module if isinstance(graph, LazyGraph) else graph
        if len(example_inputs) == 1 and isinstance(example_inputs[0], tuple):
            example_inputs = example_inputs[0]
        graph = trace(target, *example_inputs)
    model = to_model(graph, opset)
    path = os.fspath(path)
    weights = sum(t.ByteSize() for t in model.graph.initializer)
    if weights > EXTERNAL_DATA_BYTES:
        onnx.save_model(model, path, save_as_external_data=True, all_tensors_to_one_file=True,
                        location=os.path.basename(path) + ".data")
    else:
        onnx.save_model(model, path)
    onnx.checker.check_model(path)
