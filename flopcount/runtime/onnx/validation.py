"""Whether an ONNX model may be imported: its opset is one the onnx package defines, every node
has a converter (with ``strict``), ``onnx.checker`` accepts it, and the raw data of every
weight the checker does not see has the size its shape and type need."""

from __future__ import annotations

from math import prod

from ..errors import ModelFileError, UnsupportedOpError
from ..graph.importing import first_line
from .converters import CONVERTERS
from .elem_types import TO_DTYPE
from .model import DEFAULT_DOMAINS, all_nodes, all_tensors, default_opset, onnx_package, op_label
from .reading import SHAPE_DATA_MAX, FileWeights


def check_opset(model, path: str) -> None:
    # a version the onnx package does not define has no schemas: attributes and semantics unknown
    onnx = onnx_package()
    opset, newest = default_opset(model), onnx.defs.onnx_opset_version()
    if opset > newest:
        raise ModelFileError(f"{path or 'model'}: declares ONNX opset {opset}, but the installed onnx package "
                             f"({onnx.__version__}) defines opsets up to {newest}; upgrade onnx or export at "
                             f"opset {newest} or lower")


def unsupported_ops(model) -> dict:
    """{op label: [node names]} for every node no converter handles."""
    found: dict = {}
    for i, node in enumerate(all_nodes(model.graph)):
        if op_label(node) in CONVERTERS:
            continue
        found.setdefault(op_label(node), []).append(node.name or f"#{i}")
    return found


def unsupported_listing(model) -> str:
    """``2 ONNX op type(s) with no converter: FooOp (2 nodes: 'a', 'b'); ...``, or ''."""
    found = unsupported_ops(model)
    if not found:
        return ""
    parts = []
    for label, names in found.items():
        shown = ", ".join(repr(n) for n in names[:5]) + (", ..." if len(names) > 5 else "")
        parts.append(f"{label} ({len(names)} node{'s' if len(names) > 1 else ''}: {shown})")
    return f"{len(found)} ONNX op type(s) with no converter: " + "; ".join(parts)


def check_supported(model, path: str) -> None:
    listing = unsupported_listing(model)
    if listing:
        raise UnsupportedOpError(f"{path or 'model'}: {listing}")


# ops onnxruntime registers in ONNX's own domain at every opset, where ONNX does not define them
# (Llama exports write SimplifiedLayerNormalization there; the transformer optimizer writes
# LayerNormalization into opset-16 files): the checker sees those nodes in com.microsoft
ONNXRUNTIME_DEFAULT_DOMAIN_OPS = ("SimplifiedLayerNormalization", "LayerNormalization")


def _onnxruntime_ops_onnx_lacks(model) -> list:
    """The nodes of ``ONNXRUNTIME_DEFAULT_DOMAIN_OPS`` the model's opset does not define."""
    onnx, opset = onnx_package(), default_opset(model)

    def defined(op_type: str) -> bool:
        try:
            onnx.defs.get_schema(op_type, opset)
            return True
        except Exception:  # onnx.defs.SchemaError: not at this opset
            return False

    return [node for node in model.graph.node if node.domain in DEFAULT_DOMAINS
            and node.op_type in ONNXRUNTIME_DEFAULT_DOMAIN_OPS and not defined(node.op_type)]


def check_model(model, path: str, data: bytes | None, weights: FileWeights | None, strict: bool) -> None:
    """The checks of a model before its conversion (``load``): with ``strict``, every node has
    a converter; then ``validate``, where op types ONNX does not define in its own domain are
    named all at once, as ``strict`` does."""
    if strict:
        check_supported(model, path)
    try:
        validate(model, path, data, weights)
    except ModelFileError as exc:
        listing = unsupported_listing(model) if "No Op registered for" in str(exc) else ""
        if not listing:  # a known op at an opset that does not define it: the file is wrong
            raise
        raise UnsupportedOpError(f"{path or 'model'}: {listing} (the checker: "
                                 f"{str(exc).split('model: ', 1)[-1]})") from None


def validate(model, path: str, data: bytes | None = None, weights: FileWeights | None = None) -> None:
    """Run ``onnx.checker`` on ``model``; ``data`` is its serialized form when at hand (the
    file's bytes, for a model read and not changed since). With ``weights`` (the model lacks
    their raw data), the raw data's sizes are checked here and the checker sees those
    initializers as empty tensors."""
    moved = _onnxruntime_ops_onnx_lacks(model)
    if not moved:
        _check(model, path, data, weights)
        return
    added = not any(entry.domain == "com.microsoft" for entry in model.opset_import)
    for node in moved:
        node.domain = "com.microsoft"
    if added:
        model.opset_import.add(domain="com.microsoft", version=1)
    try:
        _check(model, path, None, weights)
    finally:
        for node in moved:
            node.domain = ""
        if added:
            del model.opset_import[-1]


def _check(model, path: str, data: bytes | None, weights: FileWeights | None) -> None:
    onnx = onnx_package()
    try:
        if path and any(t.data_location == onnx.TensorProto.EXTERNAL for t in all_tensors(model)):
            # the path form resolves side files next to the model, not in the working dir
            onnx.checker.check_model(path)
            return
        declared = list(model.graph.input) + list(model.graph.output)
        if any(v.type.HasField("tensor_type") and not v.type.tensor_type.HasField("shape") for v in declared):
            # the checker wants declared shapes, which some producers leave out; infer them
            if weights is not None:
                _check_raw_sizes(weights.stripped(model), path)
                model = _for_inference(model, weights)
            onnx.checker.check_model(onnx.shape_inference.infer_shapes(model))
            return
        if weights is None:
            onnx.checker.check_model(data if data is not None else model)
            return
    except Exception as exc:
        _checker_error(exc, path)
        return
    _check_raw_sizes(weights.stripped(model), path)
    stripped = [init for init, _ in weights.stripped(model)]
    shapes = [list(init.dims) for init in stripped]
    try:
        for init in stripped:  # a 0-element tensor needs no data: what the checker sees
            del init.dims[:]
            init.dims.append(0)
        onnx.checker.check_model(model)
    except Exception as exc:
        _checker_error(exc, path)
    finally:
        for init, dims in zip(stripped, shapes):
            del init.dims[:]
            init.dims.extend(dims)


def _for_inference(model, weights: FileWeights):
    """A copy of ``model`` (which lacks its weights' raw data) for shape inference and the
    checker: small initializers with their values, which inference may read (shape data), and
    large ones declared as graph inputs of their type and shape, which is all inference needs
    of them. Parsing the whole file again for this, with its weights, tripled the peak memory
    of a model whose outputs have no declared shape (3.1 GB for a 512 MiB weight)."""
    onnx = onnx_package()
    light = onnx.ModelProto()
    light.CopyFrom(model)
    graph = light.graph
    inputs = {v.name for v in graph.input}
    kept = []
    for init, span in zip(graph.initializer, weights.spans):
        if span is not None and span[1] > SHAPE_DATA_MAX:
            if init.name not in inputs:
                graph.input.append(onnx.helper.make_tensor_value_info(init.name, init.data_type, list(init.dims)))
            continue
        if span is not None:
            offset, length = span
            init.raw_data = bytes(memoryview(weights.data)[offset:offset + length])
        kept.append(init)
    kept = [onnx.TensorProto.FromString(t.SerializeToString()) for t in kept]
    del graph.initializer[:]
    graph.initializer.extend(kept)
    return light


def _checker_error(exc: Exception, path: str) -> None:
    if "is deprecated in domain_version" in str(exc):
        return  # a deprecated op version (GroupNormalization-18) is still a defined one
    raise ModelFileError(f"{path or 'model'}: not a valid ONNX model: {first_line(exc)}") from None


def _check_raw_sizes(stripped: list, path: str) -> None:
    """What the checker checks of a tensor's raw data, for the tensors it does not see with
    their data: no negative dim, and exactly as many bytes as the shape and type need (the
    checker refuses fewer; more cannot be read as the declared shape)."""
    for init, length in stripped:
        dims = list(init.dims)
        if any(d < 0 for d in dims):
            raise ModelFileError(f"{path or 'model'}: not a valid ONNX model: Negative dimension value "
                                 f"(tensor name: {init.name}, dims {dims})")
        needed = TO_DTYPE[init.data_type].nbytes(prod(dims))
        if length != needed:
            raise ModelFileError(f"{path or 'model'}: not a valid ONNX model: TensorProto (tensor name: "
                                 f"{init.name}) raw_data size ({length} bytes) does not match the declared "
                                 f"shape {dims} and type ({needed} bytes required)")
