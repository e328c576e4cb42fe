"""What an ONNX ModelProto holds, as the importer reads it: the onnx package, the op label and
opset of a node, every node and every tensor through subgraphs and local functions, the graph's
declared inputs, and a node's attributes with its schema's defaults."""

from __future__ import annotations

from ..errors import UnsupportedOpError
from ..optional import require

DEFAULT_DOMAINS = ("", "ai.onnx")


def onnx_package():
    """The ``onnx`` package: a core dependency, which an environment may still lack."""
    return require("onnx", "reading and writing ONNX files needs the onnx package: pip install onnx")


def default_opset(model) -> int:
    for entry in model.opset_import:
        if entry.domain in DEFAULT_DOMAINS:
            return entry.version
    return 1


def op_label(node) -> str:
    return node.op_type if node.domain in DEFAULT_DOMAINS else f"{node.domain}.{node.op_type}"


def subgraphs(node) -> list:
    """The GraphProto attributes of ``node`` (If's branches, Loop's and Scan's body)."""
    onnx = onnx_package()
    out = []
    for attr in node.attribute:
        if attr.type == onnx.AttributeProto.GRAPH:
            out.append(attr.g)
        elif attr.type == onnx.AttributeProto.GRAPHS:
            out.extend(attr.graphs)
    return out


def all_nodes(graph):
    """Every node of ``graph`` and of its subgraphs, depth first."""
    for node in graph.node:
        yield node
        for sub in subgraphs(node):
            yield from all_nodes(sub)


def all_tensors(model):
    """Every TensorProto in ``model``, wherever it sits: initializers and sparse initializers,
    node attributes (``t``, ``tensors``, sparse ones), in the main graph, every subgraph and
    every local function. External data is resolved for all of them through one checked path."""
    def sparse(s):
        yield s.values
        yield s.indices

    def of_nodes(nodes):
        for node in nodes:
            for a in node.attribute:
                if a.HasField("t"):
                    yield a.t
                yield from a.tensors
                if a.HasField("sparse_tensor"):
                    yield from sparse(a.sparse_tensor)
                for s in a.sparse_tensors:
                    yield from sparse(s)
            for graph in subgraphs(node):
                yield from of_graph(graph)

    def of_graph(graph):
        yield from graph.initializer
        for s in graph.sparse_initializer:
            yield from sparse(s)
        yield from of_nodes(graph.node)

    yield from of_graph(model.graph)
    for function in model.functions:
        yield from of_nodes(function.node)


def declared_inputs(model, initializers: set) -> list:
    """[(name, dims or None, element type)] of the graph inputs that are not initializers."""
    out = []
    for value in model.graph.input:
        if value.name in initializers:
            continue
        if not value.type.HasField("tensor_type"):
            raise UnsupportedOpError(f"graph input {value.name!r} is not a tensor (sequences and maps are "
                                     f"not supported)")
        tt = value.type.tensor_type
        dims = None
        if tt.HasField("shape"):
            dims = [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tt.shape.dim]
        out.append((value.name, dims, tt.elem_type))
    return out


def _python_value(value):
    onnx = onnx_package()
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, onnx.TensorProto):
        return onnx.numpy_helper.to_array(value)
    if isinstance(value, list):
        return [_python_value(v) for v in value]
    return value


_SCHEMA_DEFAULTS: dict = {}


def _schema_defaults(op_type: str, opset: int, domain: str = "") -> dict:
    """The attribute defaults the operator schema in force at ``opset`` declares."""
    key = (op_type, opset, domain)
    if key not in _SCHEMA_DEFAULTS:
        onnx = onnx_package()
        defaults = {}
        try:
            schema = onnx.defs.get_schema(op_type, opset, domain)
        except Exception:  # an op newer than this onnx package: no defaults to add
            schema = None
        if schema is not None:
            for name, attr in schema.attributes.items():
                if attr.default_value.type != 0:
                    defaults[name] = _python_value(onnx.helper.get_attribute_value(attr.default_value))
        _SCHEMA_DEFAULTS[key] = defaults
    return _SCHEMA_DEFAULTS[key]


def node_attributes(node, opset: int) -> dict:
    """The node's attributes as Python values, with the defaults of its schema at ``opset`` (the
    version of the node's domain the model imports)."""
    onnx = onnx_package()
    domain = "" if node.domain in DEFAULT_DOMAINS else node.domain
    attrs = dict(_schema_defaults(node.op_type, opset, domain))
    for attr in node.attribute:
        attrs[attr.name] = _python_value(onnx.helper.get_attribute_value(attr))
    return attrs
