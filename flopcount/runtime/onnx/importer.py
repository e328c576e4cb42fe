"""``load(path, input_shapes=None) -> Graph``: an ONNX file as an ordinary runtime Graph.

1. read the file with the ``onnx`` package (weights in side files too); a missing, truncated
   or corrupted file, or one that is not ONNX, is a ModelFileError naming the file;
2. with ``strict``, check every node has a converter, and report all that do not in one
   UnsupportedOpError (otherwise such a node becomes an ``opaque`` op, see ``load``);
3. ``onnx.checker`` validates the model; the size of every weight's raw data is checked
   against its shape and type here;
4. bind symbolic input dims from ``input_shapes`` (``symbolic.py``);
5. run the converters under the graph tracer: each ONNX node becomes runtime ops recorded in
   the node's module scope, and shape arithmetic folds to constants because the tracer runs
   ops whose inputs are all constants at once.

Initializers become named graph parameters, except 0-d tensors and small integer tensors (shape
data: constants) and the running statistics of BatchNormalization (buffers). Initializers that
only served as import-time constants (a Resize's scales) are dropped with the dead code.

Weights are not copied out of the file: ``wire.py`` finds where each initializer's raw data
lies in the file's bytes, protobuf parses the rest, and the arrays are read-only views of the
file's bytes (copied only where the data is not aligned for its type, as the kernels want it).
The runtime's in-place methods copy such an array before writing (copy-on-write), so an
imported graph can still be trained or loaded with a state dict. The checker sees the model
with those weights left out, so it does not parse them a second time.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import stat
import sys
from collections import ChainMap, OrderedDict
from math import prod

import numpy as np

from ..device import CPU, META, device as parse_device
from ..dispatch import named_scope
from ..errors import ModelFileError, UnsupportedOpError
from ..optional import require
from ..allocator import give_back_freed_memory
from ..io.files import open_model_file
from ..graph.ir import Graph
from ..graph.passes.dce import dce
from ..graph.importing import first_line, node_inputs, trace_import
from ..nn.parameter import Parameter
from ..tensor import Tensor
from . import naming, symbolic, wire
from .tables import precomputed_tables
from ..ops.opaque import opaque
from .converters import CONVERTERS, PACKED_WEIGHTS, NodeContext
from .converters.quantized import mac_dtype as quantized_mac_dtype
from .elem_types import TO_DTYPE, to_dtype, unpack

# integer initializers up to this many elements are shape data (Reshape targets, axes, ids)
SHAPE_DATA_MAX = 4096
_DEFAULT_DOMAINS = ("", "ai.onnx")


def _onnx():
    # onnx is a core dependency; an environment may still lack it
    return require("onnx", "reading and writing ONNX files needs the onnx package: pip install onnx")


# --- reading -----------------------------------------------------------------------------------

def read_model(path: str):
    """The ModelProto of ``path`` without its external data; a ModelFileError when the file is
    missing or is not a readable ONNX model. The raw data of plain initializers may be left
    out of it (see ``_read``)."""
    return _read(path)[0]


class FileWeights:
    """The file's bytes and where each initializer's raw data lies in them (``wire.py``);
    ``spans[i]`` is ``(offset, length)`` for the i-th initializer of the model, or None where
    the model itself still holds the tensor's data.

    Given the element types (the buffer is then the importer's own copy of the file), the raw
    data is moved, in place, to addresses aligned for its type before the first array is made
    (a few bytes left or right, over headers that protobuf has parsed; the buffer is no longer
    a valid file after that): kernels take slower paths on unaligned arrays, and copying them
    out would allocate the weights a second time."""

    def __init__(self, data, spans: list, types: list | None = None):
        self.data = data
        self.spans = list(spans)
        self._unaligned = types  # None: the buffer is not ours to rearrange (a mapped file)

    def _align(self, types: list) -> None:
        view = np.frombuffer(self.data, np.uint8)
        base = view.ctypes.data
        order = sorted((span[0], i) for i, span in enumerate(self.spans) if span is not None)
        end_before = 0  # end of the previous (already placed) raw data
        for k, (offset, i) in enumerate(order):
            length = self.spans[i][1]
            align = TO_DTYPE[types[i]].np.alignment
            miss = (base + offset) % align
            target = offset
            if miss:
                next_start = order[k + 1][0] if k + 1 < len(order) else len(view)
                if offset - miss >= end_before:
                    target = offset - miss
                elif offset - miss + align + length <= next_start:
                    target = offset - miss + align
                if target != offset:  # memmove: the two ranges overlap
                    ctypes.memmove(base + target, base + offset, length)
                    self.spans[i] = (target, length)
            end_before = target + length

    def stripped(self, model) -> list:
        """(initializer, raw length) of every initializer whose raw data is in the file."""
        return [(init, span[1]) for init, span in zip(model.graph.initializer, self.spans) if span is not None]

    def array(self, i: int, dtype, dims: tuple) -> np.ndarray:
        """The i-th initializer as a read-only view of the file's bytes; a copy where it could
        not be aligned for ``dtype`` or is small (shape data, biases: a view would keep the
        whole file's bytes alive for them)."""
        if self._unaligned is not None:
            self._align(self._unaligned)
            self._unaligned = None
        offset, length = self.spans[i]
        if dtype.bits < 8:  # packed two to a byte: unpacked into an array of its own
            return unpack(memoryview(self.data)[offset:offset + length], dtype, prod(dims)).reshape(dims)
        array = np.frombuffer(self.data, dtype=dtype.np, count=length // dtype.itemsize, offset=offset)
        array = array.reshape(dims)
        if not array.flags.aligned or array.size <= SHAPE_DATA_MAX:
            return array.copy()
        array.flags.writeable = False  # adopted: the runtime's in-place methods copy it first
        return array


def _read(path: str, meta: bool = False) -> tuple:
    """(ModelProto, the file's bytes, FileWeights or None). The file is read once. When its
    layout allows (``wire.py``), protobuf parses the file without its weights' raw data, which
    the arrays then take from the file's bytes (FileWeights); otherwise the whole file. With
    ``meta`` (no weight arrays wanted) the file is mapped rather than read, so only the pages
    the structure lies on are touched."""
    onnx = _onnx()
    if not os.path.exists(path):
        raise ModelFileError(f"{path}: no such file")
    if os.path.isdir(path):
        raise ModelFileError(f"{path}: is a directory, not an ONNX file")
    model = weights = None
    with open_model_file(path) as f:
        data = _mapped(f) if meta else _read_into_buffer(f)
    try:
        split = wire.split_weights(data, TO_DTYPE) if sys.byteorder == "little" else None
        if split is not None:
            light, spans = split
            try:
                model = onnx.load_model_from_string(light)
                if len(model.graph.initializer) == len(spans) and not model.functions:
                    types = None if meta else [init.data_type for init in model.graph.initializer]
                    weights = FileWeights(data, spans, types)
                else:  # not what the split expected (functions are inlined into a new model)
                    model = None
            except Exception:  # the whole file gives the error message
                model = None
        if model is None:
            data = data if isinstance(data, bytes) else bytes(data)
            model = onnx.load_model_from_string(data)
    except Exception as exc:  # protobuf's DecodeError and friends
        raise ModelFileError(f"{path}: not a readable ONNX model (truncated, corrupted or another "
                             f"format): {first_line(exc)}") from None
    if model.ir_version <= 0 or not model.HasField("graph"):
        raise ModelFileError(f"{path}: not an ONNX model (no IR version or no graph; truncated or "
                             f"another format)")
    _check_names(model, path)
    return model, data, weights


def _read_into_buffer(f):
    """The file's bytes in a writable buffer of our own, in which the weights' arrays are made:
    anonymous memory mapped with its pages made at once (MAP_POPULATE: one call instead of a
    page fault per 4 KiB while reading), or a bytearray where that is not available."""
    size = os.fstat(f.fileno()).st_size
    populate = getattr(mmap, "MAP_POPULATE", 0)
    if size and populate:
        try:
            buffer = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | populate)
        except (OSError, ValueError):
            buffer = None
        if buffer is not None:
            if f.readinto(buffer) == size and not f.read(1):
                return buffer
            f.seek(0)  # the file changed size while it was read: read it as it is now
    return bytearray(f.read())


def _mapped(f):
    """The file mapped read-only, or None where it cannot be (an empty file, some file systems)."""
    try:
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except (ValueError, OSError):
        return None


def _check_names(model, path: str) -> None:
    # protobuf hands back a string field that is not valid UTF-8 as bytes: a corrupted file
    graph = model.graph
    names = [graph.name] + [v.name for v in list(graph.input) + list(graph.output)]
    names += [t.name for t in graph.initializer]
    for node in graph.node:
        names += [node.name, node.op_type, node.domain, *node.input, *node.output]
        names += [a.name for a in node.attribute]
    bad = next((n for n in names if not isinstance(n, str)), None)
    if bad is not None:
        raise ModelFileError(f"{path}: not a readable ONNX model (a name is not valid UTF-8: {bad[:40]!r}; "
                             f"the file is corrupted)")


def _all_tensors(model):
    """Every TensorProto in ``model``, wherever it sits: initializers and sparse initializers,
    node attributes (``t``, ``tensors``, sparse ones), in the main graph, every subgraph and
    every local function. External data is resolved for all of them through one checked path."""
    onnx = _onnx()

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
                if a.type == onnx.AttributeProto.GRAPH:
                    yield from of_graph(a.g)
                for g in a.graphs:
                    yield from of_graph(g)

    def of_graph(graph):
        yield from graph.initializer
        for s in graph.sparse_initializer:
            yield from sparse(s)
        yield from of_nodes(graph.node)

    yield from of_graph(model.graph)
    for function in model.functions:
        yield from of_nodes(function.node)


def _has_external_data(model) -> bool:
    onnx = _onnx()
    return any(t.data_location == onnx.TensorProto.EXTERNAL for t in _all_tensors(model))


# ops onnxruntime registers in ONNX's own domain at every opset, where ONNX does not define them
# (Llama exports write SimplifiedLayerNormalization there; the transformer optimizer writes
# LayerNormalization into opset-16 files): the checker sees those nodes in com.microsoft
ONNXRUNTIME_DEFAULT_DOMAIN_OPS = ("SimplifiedLayerNormalization", "LayerNormalization")


def _onnxruntime_ops_onnx_lacks(model) -> list:
    """The nodes of ``ONNXRUNTIME_DEFAULT_DOMAIN_OPS`` the model's opset does not define."""
    onnx, opset = _onnx(), default_opset(model)

    def defined(op_type: str) -> bool:
        try:
            onnx.defs.get_schema(op_type, opset)
            return True
        except Exception:  # onnx.defs.SchemaError: not at this opset
            return False

    return [node for node in model.graph.node if node.domain in _DEFAULT_DOMAINS
            and node.op_type in ONNXRUNTIME_DEFAULT_DOMAIN_OPS and not defined(node.op_type)]


def _validate(model, path: str, data: bytes | None = None, weights: FileWeights | None = None) -> None:
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
    onnx = _onnx()
    try:
        if path and _has_external_data(model):
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
    onnx = _onnx()
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


def _load_external_data(model, path: str) -> dict:
    """Read the external data of every tensor in ``model`` from the model's own folder. onnx's
    reader refuses a location that leaves the folder (``..``, an absolute path, a symlink out)
    and an offset or length beyond the file; a model given without a path has no folder, so
    its external data is refused rather than looked for in the working directory.

    The graph's initializers of numeric types are not read into the model but mapped: returned
    as {name: read-only array over the side file}, whose pages are read when a run touches them
    (loading them into protobuf and then into arrays held the weights twice: 2.5 GiB of weights
    peaked at 5.2 GB)."""
    onnx = _onnx()
    external = [t for t in _all_tensors(model) if t.data_location == onnx.TensorProto.EXTERNAL]
    if not external:
        return {}
    if not path:
        raise ModelFileError(f"model: tensor {external[0].name!r} stores its data in an external file, but the "
                             f"model was given without a path to find it from; pass the .onnx file's path")
    folder = os.path.dirname(os.path.abspath(path))
    initializers = {id(t) for t in model.graph.initializer}
    mapped, files = {}, {}
    for tensor in external:
        _check_location(tensor, folder, path)
        if id(tensor) in initializers and _mappable(tensor):
            mapped[tensor.name] = _mapped_tensor(tensor, folder, path, files)
            continue
        try:
            onnx.external_data_helper.load_external_data_for_tensor(tensor, folder)
        except Exception as exc:
            raise ModelFileError(f"{path}: cannot read the model's external weight data: {first_line(exc)}") from None
    return mapped


def _mappable(tensor) -> bool:
    dtype = TO_DTYPE.get(tensor.data_type)
    return dtype is not None and dtype.bits >= 8 and sys.byteorder == "little"  # ONNX stores little-endian


def _mapped_tensor(tensor, folder: str, path: str, files: dict) -> np.ndarray:
    """The tensor's values as a read-only array mapped from its side file (checked by
    ``_check_location``), after the checks onnx's reader makes: offset and length inside the
    file, and a length that fits the declared shape. ``files`` holds each file's one mapping."""
    info = {e.key: e.value for e in tensor.external_data}
    dtype, dims = TO_DTYPE[tensor.data_type], tuple(tensor.dims)
    need = dtype.nbytes(prod(dims))
    file = os.path.join(folder, info["location"])
    try:
        offset = int(info.get("offset", 0))
        length = int(info.get("length", need))
        size = os.stat(file).st_size
    except (ValueError, OSError) as exc:
        raise ModelFileError(f"{path}: cannot read the model's external weight data: {first_line(exc)}") from None
    if offset < 0 or length != need or offset + length > size:
        raise ModelFileError(f"{path}: cannot read the model's external weight data: tensor {tensor.name!r} "
                             f"claims bytes {offset} to {offset + length} of {info['location']!r} ({size} bytes), "
                             f"and its shape {list(dims)} needs {need}")
    if need == 0:
        return np.zeros(dims, dtype.np)
    if file not in files:
        with open_model_file(file) as f:
            files[file] = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    array = np.frombuffer(files[file], dtype=dtype.np, count=prod(dims), offset=offset).reshape(dims)
    if not array.flags.aligned or array.size <= SHAPE_DATA_MAX:
        return np.array(array)  # kernels take slow paths on unaligned arrays; shape data is small
    return array


def _check_location(tensor, folder: str, path: str) -> None:
    """Our own check before onnx's (older onnx releases do not make it): the side file is a
    regular file inside the model's folder, reached without ``..``, an absolute path or a
    symlink that leads out."""
    location = next((e.value for e in tensor.external_data if e.key == "location"), "")
    parts = location.replace("\\", "/").split("/")
    target = os.path.realpath(os.path.join(folder, location))
    inside = os.path.commonpath([target, os.path.realpath(folder)]) == os.path.realpath(folder)
    if not location or os.path.isabs(location) or ".." in parts or not inside:
        raise ModelFileError(f"{path}: tensor {tensor.name!r} stores its data at {location[:200]!r}, which is not "
                             f"a file inside the model's folder")
    if os.path.exists(target) and not stat.S_ISREG(os.stat(target).st_mode):
        raise ModelFileError(f"{path}: tensor {tensor.name!r} stores its data at {location[:200]!r}, which is not "
                             f"a regular file")


# --- what the file needs -----------------------------------------------------------------------

def default_opset(model) -> int:
    for entry in model.opset_import:
        if entry.domain in _DEFAULT_DOMAINS:
            return entry.version
    return 1


def _check_opset(model, path: str) -> None:
    # a version the onnx package does not define has no schemas: attributes and semantics unknown
    onnx = _onnx()
    opset, newest = default_opset(model), onnx.defs.onnx_opset_version()
    if opset > newest:
        raise ModelFileError(f"{path or 'model'}: declares ONNX opset {opset}, but the installed onnx package "
                             f"({onnx.__version__}) defines opsets up to {newest}; upgrade onnx or export at "
                             f"opset {newest} or lower")


def op_label(node) -> str:
    return node.op_type if node.domain in _DEFAULT_DOMAINS else f"{node.domain}.{node.op_type}"


def unsupported_ops(model) -> dict:
    """{op label: [node names]} for every node no converter handles."""
    found: dict = OrderedDict()
    for i, node in enumerate(_all_nodes(model.graph)):
        if op_label(node) in CONVERTERS:
            continue
        found.setdefault(op_label(node), []).append(node.name or f"#{i}")
    return found


def _unsupported_listing(model) -> str:
    """``2 ONNX op type(s) with no converter: FooOp (2 nodes: 'a', 'b'); ...``, or ''."""
    found = unsupported_ops(model)
    if not found:
        return ""
    parts = []
    for label, names in found.items():
        shown = ", ".join(repr(n) for n in names[:5]) + (", ..." if len(names) > 5 else "")
        parts.append(f"{label} ({len(names)} node{'s' if len(names) > 1 else ''}: {shown})")
    return f"{len(found)} ONNX op type(s) with no converter: " + "; ".join(parts)


def _check_supported(model, path: str) -> None:
    listing = _unsupported_listing(model)
    if listing:
        raise UnsupportedOpError(f"{path or 'model'}: {listing}")


# --- attributes --------------------------------------------------------------------------------

def _python_value(value):
    onnx = _onnx()
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
        onnx = _onnx()
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
    onnx = _onnx()
    domain = "" if node.domain in _DEFAULT_DOMAINS else node.domain
    attrs = dict(_schema_defaults(node.op_type, opset, domain))
    for attr in node.attribute:
        attrs[attr.name] = _python_value(onnx.helper.get_attribute_value(attr))
    return attrs


# --- inputs and initializers -------------------------------------------------------------------

def _declared_inputs(model, initializers: set) -> list:
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


def _buffer_names(model) -> set:
    """Initializers that are running statistics (BatchNormalization's mean and variance) or
    precomputed tables (rotary caches, masks: ``tables.py``): buffers, not parameters."""
    return {name for node in model.graph.node if node.op_type == "BatchNormalization"
            for name in node.input[3:5] if name} | precomputed_tables(model)


# the inputs of quantization ops that hold a layer's weights in an integer or float8 type
_QUANTIZED_WEIGHT_INPUTS = {"DequantizeLinear": (0,), "MatMulInteger": (1,), "ConvInteger": (1,),
                            "QLinearMatMul": (3,), "QLinearConv": (3,), "com.microsoft.MatMulNBits": (1,),
                            "com.microsoft.MatMulIntegerToFloat": (1,), "com.microsoft.QOrderedMatMul": (2,)}


def _quantized_weight_names(model) -> set:
    """Initializers that are quantized weights: parameters of the model whatever their type
    (a QDQ file's int8 conv weights count as its parameters, at one byte each)."""
    return {node.input[i] for node in model.graph.node for i in _QUANTIZED_WEIGHT_INPUTS.get(op_label(node), ())
            if i < len(node.input) and node.input[i]}


def _packed_weights(model) -> dict:
    """{initializer name: (unpack, the reading node's attributes)} for weights a file stores
    packed (MatMulNBits' two 4-bit numbers per byte): imported as the tensor they stand for."""
    found = {}
    for node in model.graph.node:
        entry = PACKED_WEIGHTS.get(op_label(node))
        if entry is not None and len(node.input) > entry[0] and node.input[entry[0]]:
            found[node.input[entry[0]]] = (entry[1], node_attributes(node, 1))
    return found


def _initializer_tensors(model, path: str, weights: FileWeights | None = None, meta: bool = False,
                        mapped: dict | None = None) -> tuple:
    """(constants, parameters): {name: Tensor} and {name: (Tensor, kind)}. Arrays are adopted
    as they come (read-only views of the file's or protobuf's bytes), not copied. With
    ``meta``, an initializer whose raw data is in the file (its size checked) and that is
    larger than shape data becomes a meta tensor: nothing is made for it."""
    buffers, quantized, packed = _buffer_names(model), _quantized_weight_names(model), _packed_weights(model)
    constants, params = {}, {}
    for i, init in enumerate(model.graph.initializer):
        dtype = to_dtype(init.data_type, f"initializer {init.name!r}")
        in_file = weights is not None and weights.spans[i] is not None
        if init.name in quantized and prod(init.dims) > 1:
            tensor = Tensor._make(None, tuple(init.dims), dtype, META) if in_file and meta else None
            if tensor is None:
                array = weights.array(i, dtype, tuple(init.dims)) if in_file else _array_of(init, dtype, path, mapped)
                tensor = Tensor._make(array, tuple(array.shape), dtype, CPU)
            if init.name in packed:
                unpack, attrs = packed[init.name]
                try:
                    array, shape, dtype = unpack(tensor.data, tuple(init.dims), attrs)
                except ValueError as exc:
                    raise UnsupportedOpError(f"initializer {init.name!r}: {exc}") from None
                tensor = Tensor._make(array, shape, dtype, META if array is None else CPU)
            params[init.name] = (Parameter(tensor), "param")
            continue
        if in_file and meta and prod(init.dims) > SHAPE_DATA_MAX:
            shape = tuple(init.dims)
            tensor = Tensor._make(None, shape, dtype, META)
            if init.name in buffers or not dtype.is_floating_point:
                params[init.name] = (tensor, "buffer")
            else:
                params[init.name] = (Parameter(tensor), "param")
            continue
        array = weights.array(i, dtype, tuple(init.dims)) if in_file else _array_of(init, dtype, path, mapped)
        tensor = Tensor._make(array, tuple(array.shape), dtype, CPU)
        if array.ndim == 0 or (not dtype.is_floating_point and array.size <= SHAPE_DATA_MAX):
            constants[init.name] = tensor
        elif init.name in buffers or not dtype.is_floating_point:
            params[init.name] = (tensor, "buffer")
        else:
            params[init.name] = (Parameter(tensor), "param")
    return constants, params


def _array_of(init, dtype, path: str, mapped: dict | None = None) -> np.ndarray:
    """An initializer's values: mapped from its external file, or read by onnx (typed data
    fields, external data loaded)."""
    if mapped and init.name in mapped:
        return mapped[init.name]
    try:
        array = _onnx().numpy_helper.to_array(init)
    except Exception as exc:
        raise ModelFileError(f"{path or 'model'}: initializer {init.name!r} cannot be read: "
                             f"{first_line(exc)}") from None
    return np.asarray(array, dtype=dtype.np)


# --- conversion --------------------------------------------------------------------------------

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
                            if n.op_type == "DequantizeLinear" and n.domain in _DEFAULT_DOMAINS and n.output}
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
        outs = []
        for v in self.model.graph.output:
            if v.name not in values:
                raise ModelFileError(f"graph output {v.name!r} is not computed by any node")
            outs.append(values[v.name])
        return outs[0] if len(outs) == 1 else tuple(outs)

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
                    raise UnsupportedOpError(f"{_unsupported_listing(self.model)}; {label} node {node.name!r} has "
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
            onnx = _onnx()
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
        opset = self.opset if node.domain in _DEFAULT_DOMAINS else self.domains.get(node.domain, 1)
        ctx = NodeContext(node.op_type, node.name, opset, node_attributes(node, opset),
                          len(node.output), tuple(bool(name) and name in self.used for name in node.output),
                          self.sources, _Subgraphs(self, values, self.notes))
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

    def __init__(self, conversion: _Conversion, outer, notes: list):
        self.conversion, self.outer, self.notes = conversion, outer, notes

    def run(self, graph, inputs: list, scope: str) -> list:
        """The outputs of ``graph`` on ``inputs`` (tensors, one per graph input), its ops
        recorded in ``scope`` under the node's own."""
        onnx = _onnx()
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
        self.notes.append(text)


def _subgraphs(node) -> list:
    """The GraphProto attributes of ``node`` (If's branches, Loop's and Scan's body)."""
    onnx = _onnx()
    out = []
    for attr in node.attribute:
        if attr.type == onnx.AttributeProto.GRAPH:
            out.append(attr.g)
        elif attr.type == onnx.AttributeProto.GRAPHS:
            out.extend(attr.graphs)
    return out


def _all_nodes(graph):
    """Every node of ``graph`` and of its subgraphs, depth first."""
    for node in graph.node:
        yield node
        for sub in _subgraphs(node):
            yield from _all_nodes(sub)


def _names_read(graph) -> set:
    """Names read anywhere: node inputs (in subgraphs too, which read outer values by name) and
    the outputs of the graph and its subgraphs."""
    used = {v.name for v in graph.output}
    for node in graph.node:
        used.update(name for name in node.input if name)
        for sub in _subgraphs(node):
            used |= _names_read(sub)
    return used


def _last_reads(graph) -> dict:
    """{name: index of the last node of ``graph`` that reads it, itself or in its subgraphs}
    for every name :func:`_names_read` gives; the graph's outputs are read after its last node."""
    last = {}
    for i, node in enumerate(graph.node):
        for name in node.input:
            if name:
                last[name] = i
        for sub in _subgraphs(node):
            last.update(dict.fromkeys(_names_read(sub), i))
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
    constants, params = _initializer_tensors(model, path, weights, meta, mapped or {})
    declared = _declared_inputs(model, {t.name for t in model.graph.initializer})
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
    onnx = _onnx()
    meta = device is not None and parse_device(device).type == "meta"
    if isinstance(path, onnx.ModelProto):
        model, path, data, weights = path, "", None, None
    else:
        path = os.fspath(path)
        model, data, weights = _read(path, meta)
    _check_opset(model, path)
    if model.functions:
        model, data = onnx.inliner.inline_local_functions(model), None
    if strict:
        _check_supported(model, path)
    try:
        _validate(model, path, data, weights)
    except ModelFileError as exc:
        listing = _unsupported_listing(model) if "No Op registered for" in str(exc) else ""
        if not listing:  # a known op at an opset that does not define it: the file is wrong
            raise
        # op types ONNX does not define in its own domain: name them all, as strict does
        raise UnsupportedOpError(f"{path or 'model'}: {listing} (the checker: "
                                 f"{str(exc).split('model: ', 1)[-1]})") from None
    del data  # the file's bytes, unless the weights' arrays are views of them
    mapped = _load_external_data(model, path)
    graph = import_model(model, input_shapes, path, weights, meta, input_values, mapped)
    del model, weights, mapped
    give_back_freed_memory()  # the parsed file: the heap would keep it through the whole profile
    return graph
