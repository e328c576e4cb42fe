"""``load(path, input_shapes=None) -> Graph``: an ONNX file as an ordinary runtime Graph.

1. read the file with the ``onnx`` package, weights in side files too (``reading.py``);
2. check what the file needs and validate it (``validation.py``): with ``strict``, every node
   has a converter (otherwise such a node becomes an ``opaque`` op, see ``load``);
3. sort the initializers into parameters, buffers and constants (``initializers.py``);
4. bind symbolic input dims from ``input_shapes`` (``symbolic.py``);
5. run the converters under the importers' tracer (``graph/importing.py``): each ONNX node
   becomes runtime ops recorded in the node's module scope, and shape arithmetic folds to
   constants because the tracer runs ops whose inputs are all constants at once.
"""

from __future__ import annotations

import os
from collections import ChainMap

import numpy as np

from ..allocator import give_back_freed_memory
from ..device import CPU, device as parse_device
from ..dispatch import named_scope
from ..errors import ModelFileError, UnsupportedOpError
from ..graph.importing import node_inputs, trace_import, walk_result
from ..graph.ir import Graph
from ..graph.passes.dce import dce
from ..ops.opaque import opaque
from ..tensor import Tensor
from . import naming, symbolic
from .converters import CONVERTERS, NodeContext
from .converters.quantized import mac_dtype as quantized_mac_dtype
from .elem_types import TO_DTYPE, to_dtype
from .initializers import initializer_tensors
from .model import DEFAULT_DOMAINS, declared_inputs, default_opset, node_attributes, onnx_package, op_label, subgraphs
from .reading import FileWeights, load_external_data, read_file, read_model
from .tables import precomputed_tables
from .validation import check_model, check_opset, unsupported_listing


class _Conversion:
    """Runs the ONNX nodes through their converters (the function the tracer traces)."""

    def __init__(self, model, constants: dict, params: dict, input_names: list, input_shapes: dict | None = None):
        self.model = model
        self.input_shapes = input_shapes or {}  # every graph input's bound shape, for shape inference
        self._inferred = None
        self.opset = default_opset(model)
        self.domains = {entry.domain: entry.version for entry in model.opset_import}
        self.values = dict(constants)
        self.values.update((name, t) for name, (t, _) in params.items())
        self.input_names = input_names
        self.tracer = None
        # {name: index of the last node that reads it}: every name read (``in self.used``), and
        # when a value's tensor can be let go, so a long chain does not hold one per node
        self.used = _last_reads(model.graph)
        self.notes: list = []  # what the report should say about the conversion (loop trip counts)
        # {DequantizeLinear output: its quantized input}: a QDQ conv's MACs run in int8
        self.dequantized = {n.output[0]: n.input[0] for n in model.graph.node
                            if n.op_type == "DequantizeLinear" and n.domain in DEFAULT_DOMAINS and n.output}
        # their quantized inputs are looked up again at the Conv or MatMul that reads the output
        self.used.update(dict.fromkeys(self.dequantized.values(), len(model.graph.node)))

    def __call__(self, *inputs):
        values = self.values
        values.update(zip(self.input_names, inputs))
        self.input_of = {id(t._value): name for name, t in zip(self.input_names, inputs)}
        last = self.used
        for i, node in enumerate(self.model.graph.node):
            self._convert(node, values)
            for name in node.input:
                if last.get(name) == i:
                    values.pop(name, None)
        return walk_result([v.name for v in self.model.graph.output], values,
                           lambda name: ModelFileError(f"graph output {name!r} is not computed by any node"))

    def sources(self, t) -> list:
        """The graph inputs (ONNX names, in input order) whose values ``t`` is computed from."""
        if getattr(t, "_value", None) is None:
            return []
        producer = {id(v): n for n in self.tracer.graph.nodes for v in n.outputs}
        found, stack, seen = set(), [t._value], set()
        while stack:
            v = stack.pop()
            if v is None or id(v) in seen:
                continue
            seen.add(id(v))
            if id(v) in self.input_of:
                found.add(self.input_of[id(v)])
            elif id(v) in producer:
                stack.extend(producer[id(v)].inputs)
        return [name for name in self.input_names if name in found]

    def _opaque(self, node):
        """A converter for a node no converter knows: an ``opaque`` op with the output shapes
        the file states or shape inference gives (counted as zero, listed as unsupported)."""
        label = f"ONNX {op_label(node)}"

        def convert(ctx, *inputs):
            outputs = []
            for name in node.output:
                found = self._output_types().get(name)
                if found is None:
                    raise UnsupportedOpError(f"{unsupported_listing(self.model)}; {label} node {node.name!r} has "
                                             f"no converter, and neither the file nor shape inference gives the "
                                             f"shape of its output {name!r}: flopcount cannot count past it")
                outputs.append(found)
            return opaque(*inputs, label=label, node=node.name or label, outputs=outputs)

        return convert

    def _output_types(self) -> dict:
        """{value name: (shape, dtype name)} for every value whose shape the file states or ONNX
        shape inference finds once the graph inputs have their bound shapes (a symbolic dim the
        inputs bind, ``batch``, takes its value)."""
        if self._inferred is None:
            onnx = onnx_package()
            model = onnx.ModelProto()
            model.CopyFrom(self.model)
            symbols = {}
            for v in model.graph.input:
                if v.name in self.input_shapes and v.type.HasField("tensor_type"):
                    dims = v.type.tensor_type.shape.dim
                    for d, n in zip(dims, self.input_shapes[v.name]):
                        if d.dim_param:
                            symbols[d.dim_param] = int(n)
                    del dims[:]
                    for n in self.input_shapes[v.name]:
                        dims.add().dim_value = int(n)
            try:
                model = onnx.shape_inference.infer_shapes(model, data_prop=True)
            except Exception:  # inference gives up on some files: what the file states still counts
                pass
            found = {}
            for v in list(model.graph.value_info) + list(model.graph.output):
                tt = v.type.tensor_type
                if not v.type.HasField("tensor_type") or tt.elem_type not in TO_DTYPE or not tt.HasField("shape"):
                    continue
                dims = [d.dim_value if d.HasField("dim_value") else symbols.get(d.dim_param) for d in tt.shape.dim]
                if None not in dims:
                    found[v.name] = (tuple(dims), TO_DTYPE[tt.elem_type].name)
            self._inferred = found
        return self._inferred

    def _convert(self, node, values: dict, nested: bool = False) -> None:
        opset = self.opset if node.domain in DEFAULT_DOMAINS else self.domains.get(node.domain, 1)
        ctx = NodeContext(node.op_type, node.name, opset, node_attributes(node, opset),
                          len(node.output), tuple(bool(name) and name in self.used for name in node.output),
                          self.sources, _Subgraphs(self, values))
        node_name = node.name  # one string for the node's scope and source: each read of a field makes a new one
        try:
            scope, module_type = naming.node_scope(node_name, {p.key: p.value for p in node.metadata_props})
        except ModelFileError as exc:
            raise ModelFileError(f"{ctx.where}: {exc}") from None
        inputs = node_inputs([name or None for name in node.input], values, lambda name: ModelFileError(
            f"{ctx.where} reads {name!r}, which no input, initializer or earlier node defines"))
        convert = CONVERTERS.get(op_label(node)) or self._opaque(node)
        # a subgraph's nodes are their If's or Loop's: they take its module type and source
        provenance = {} if nested else {"module_type": module_type, "source": node_name}
        mac = quantized_mac_dtype(op_label(node), list(node.input), values, self.dequantized)
        with self.tracer.converting(ctx.where, scope, keep=(UnsupportedOpError, symbolic.InputValueError),
                                    invalid="attributes", mac_dtype=mac, **provenance):
            result = convert(ctx, *inputs)
        results = result if isinstance(result, (tuple, list)) else (result,)
        for i, name in enumerate(node.output):
            if i < len(results):
                if name:
                    values[name] = results[i]
            elif name and name in self.used:
                raise ctx.unsupported(f"output {i} ({name!r}) is used but not supported")


class _Subgraphs:
    """What a control-flow converter (If, Loop, Scan) uses to run a subgraph of its node: the
    subgraph's nodes converted as the outer graph's are, reading outer values by name."""

    def __init__(self, conversion: _Conversion, outer):
        self.conversion, self.outer = conversion, outer

    def run(self, graph, inputs: list, scope: str) -> list:
        """The outputs of ``graph`` on ``inputs`` (tensors, one per graph input), its ops
        recorded in ``scope`` under the node's own."""
        onnx = onnx_package()
        local: dict = {}
        for init in graph.initializer:
            array = onnx.numpy_helper.to_array(init)
            local[init.name] = Tensor._make(np.asarray(array), tuple(array.shape), to_dtype(init.data_type, init.name),
                                            CPU)
        for declared, t in zip(graph.input, inputs):
            local[declared.name] = t
        values = ChainMap(local, self.outer)
        with named_scope(scope):
            for node in graph.node:
                self.conversion._convert(node, values, nested=True)
        missing = [v.name for v in graph.output if v.name not in values]
        if missing:
            raise ModelFileError(f"subgraph {graph.name!r}: output(s) {missing} are not computed by any node")
        return [values[v.name] for v in graph.output]

    def note(self, text: str) -> None:
        self.conversion.notes.append(text)


def _last_reads(graph) -> dict:
    """{name: index of the last node of ``graph`` that reads it, itself or in its subgraphs
    (which read outer values by name)} for every name read; the graph's outputs are read after
    its last node."""
    last = {}
    for i, node in enumerate(graph.node):
        for name in node.input:
            if name:
                last[name] = i
        for sub in subgraphs(node):
            last.update(dict.fromkeys(_last_reads(sub), i))
    last.update(dict.fromkeys((v.name for v in graph.output), len(graph.node)))
    return last


def _graph_name(model, path: str) -> str:
    if model.graph.name:
        return model.graph.name
    return os.path.splitext(os.path.basename(path))[0] if path else "onnx"


def import_model(model, input_shapes=None, path: str = "", weights: FileWeights | None = None,
                 meta: bool = False, input_values: dict | None = None, mapped: dict | None = None) -> Graph:
    """A Graph from a checked ModelProto whose external data is loaded (``weights``: where the
    raw data the model lacks lies in the file's bytes; ``mapped``: {name: array} of the
    initializers whose external data is mapped rather than loaded; ``meta`` and
    ``input_values``: see ``load``)."""
    constants, params = initializer_tensors(model, path, weights, meta, mapped or {})
    declared = declared_inputs(model, {t.name for t in model.graph.initializer})
    shapes = symbolic.bind([(name, dims) for name, dims, _ in declared], input_shapes)
    dtypes = [to_dtype(code, f"graph input {name!r}") for name, _, code in declared]
    available = symbolic.input_values(declared, shapes, dtypes, input_values)
    bound: dict = {}
    while True:
        try:
            graph = _trace(model, constants, params, declared, shapes, dtypes, bound)
            break
        except symbolic.InputValueError as exc:
            # inputs whose values decide shapes become constants of the graph, like its shapes
            missing = [name for name in exc.names if name not in bound]
            if not missing or any(name not in available for name in missing):
                raise
            bound.update((name, available[name]) for name in missing)
    graph.name = _graph_name(model, path)
    tables = sorted(name for name in precomputed_tables(model) if name in graph.parameters)
    if tables:
        shown = ", ".join(tables[:4]) + (", ..." if len(tables) > 4 else "")
        graph.notes.append(f"{len(tables)} initializer(s) are precomputed tables (rotary caches, masks, expanded "
                           f"biases), counted as buffers, not parameters: {shown}")
    return graph.to("meta") if meta else graph


def _trace(model, constants: dict, params: dict, declared: list, shapes: list, dtypes: list,
           bound: dict) -> Graph:
    """Convert the nodes under the tracer; the inputs in ``bound`` are constants with those values."""
    fixed = dict(constants)
    fixed.update((name, Tensor._make(value, tuple(value.shape), to_dtype(code, name), CPU))
                 for name, _, code in declared if name in bound for value in (bound[name],))
    free = [i for i, (name, _, _) in enumerate(declared) if name not in bound]
    names = [declared[i][0] for i in free]
    conversion = _Conversion(model, fixed, params, names, {name: shape for (name, _, _), shape in zip(declared, shapes)})
    graph = trace_import(conversion, names, params, [(shapes[i], dtypes[i]) for i in free])
    graph = dce(graph, in_place=True)  # the trace's own graph: nobody else holds it
    graph.notes = list(conversion.notes)
    return graph


def load(path, input_shapes=None, device=None, input_values=None, strict: bool = False) -> Graph:
    """Import the ONNX model at ``path`` as a Graph (see the module docstring).

    ``input_shapes`` binds symbolic input dims: ``{"input_ids": (1, 128)}``, a list of shapes in
    input order, or one shape for a one-input model. ``path`` may also be an ``onnx.ModelProto``.
    ``device="meta"`` counts without weights: the graph's parameters are meta tensors and no
    array is made for weights whose raw data is in the file (their sizes are still checked);
    small initializers keep their values, which converters may read at import time (shape
    data, scales, bounds). Otherwise the graph is on the CPU (``graph.to(device)`` moves it).

    ``input_values`` ``{input name: array}`` gives the values of graph inputs that carry shapes
    (a Reshape target, Slice starts, reduction axes, Resize sizes, TopK's k): those that a node
    needs become constants of the graph and leave its inputs, as the graph is specialized to its
    input shapes; values given for other inputs are not used. A needed value not given is a
    ShapeError naming the input.

    A node no converter knows does not stop the import: it becomes an ``opaque`` op with the
    output shapes the file states (or ONNX shape inference gives), counted as zero and listed as
    unsupported; running it raises an UnsupportedOpError naming it. ``strict=True`` refuses such
    a file at once, listing every op type without a converter and its nodes.

    >>> g = rt.onnx.load("resnet18.onnx", input_shapes={"input": (1, 3, 224, 224)})  # doctest: +SKIP
    >>> g.cost().macs                                                                 # doctest: +SKIP
    1814073344
    """
    onnx = onnx_package()
    meta = device is not None and parse_device(device).type == "meta"
    if isinstance(path, onnx.ModelProto):
        model, path, data, weights = path, "", None, None
    else:
        path = os.fspath(path)
        model, data, weights = read_file(path, meta)
    check_opset(model, path)
    if model.functions:
        model, data = onnx.inliner.inline_local_functions(model), None
    check_model(model, path, data, weights, strict)
    del data  # the file's bytes, unless the weights' arrays are views of them
    mapped = load_external_data(model, path)
    graph = import_model(model, input_shapes, path, weights, meta, input_values, mapped)
    del model, weights, mapped
    give_back_freed_memory()  # the parsed file: the heap would keep it through the whole profile
    return graph


__all__ = ["load", "import_model", "read_model"]  # read_model: where the package has always found it
