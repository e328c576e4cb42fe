"""``load(path, input_shapes=None) -> Graph``: an ONNX file as an ordinary runtime Graph.

1. read the file with the ``onnx`` package (weights in side files too); a missing, truncated
   or corrupted file, or one that is not ONNX, is a ModelFileError naming the file;
2. check every node has a converter, and report all that do not in one UnsupportedOpError;
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
import sys
from collections import OrderedDict
from math import prod

import numpy as np

from ..device import CPU, META, device as parse_device
from ..dispatch import named_scope
from ..errors import FlopcountError, ModelFileError, UnsupportedOpError
from ..factories import empty
from ..graph.ir import Graph
from ..graph.passes.dce import dce
from ..graph.trace import Tracer
from ..nn.parameter import Parameter
from ..tensor import Tensor
from . import naming, symbolic, wire
from .converters import CONVERTERS, NodeContext
from .elem_types import TO_DTYPE, to_dtype

# integer initializers up to this many elements are shape data (Reshape targets, axes, ids)
SHAPE_DATA_MAX = 4096
_DEFAULT_DOMAINS = ("", "ai.onnx")


def _onnx():
    try:
        import onnx
    except ImportError:  # onnx is a core dependency; an environment may still lack it
        raise FlopcountError("reading and writing ONNX files needs the onnx package: pip install onnx") from None
    return onnx


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
    try:
        with open(path, "rb") as f:
            data = _mapped(f) if meta else _read_into_buffer(f)
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
                             f"format): {_first_line(exc)}") from None
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


def _first_line(exc) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _has_external_data(model) -> bool:
    onnx = _onnx()
    return any(t.data_location == onnx.TensorProto.EXTERNAL for t in model.graph.initializer)


def _validate(model, path: str, data: bytes | None = None, weights: FileWeights | None = None) -> None:
    """Run ``onnx.checker`` on ``model``; ``data`` is its serialized form when at hand (the
    file's bytes, for a model read and not changed since). With ``weights`` (the model lacks
    their raw data), the raw data's sizes are checked here and the checker sees those
    initializers as empty tensors."""
    onnx = _onnx()
    try:
        if path and _has_external_data(model):
            # the path form resolves side files next to the model, not in the working dir
            onnx.checker.check_model(path)
            return
        declared = list(model.graph.input) + list(model.graph.output)
        if any(v.type.HasField("tensor_type") and not v.type.tensor_type.HasField("shape") for v in declared):
            # the checker wants declared shapes, which some producers leave out; infer them
            # (shape inference reads initializers' values: it gets the whole model)
            if weights is not None:
                model = onnx.load_model_from_string(bytes(weights.data))
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


def _checker_error(exc: Exception, path: str) -> None:
    if "is deprecated in domain_version" in str(exc):
        return  # a deprecated op version (GroupNormalization-18) is still a defined one
    raise ModelFileError(f"{path or 'model'}: not a valid ONNX model: {_first_line(exc)}") from None


def _check_raw_sizes(stripped: list, path: str) -> None:
    """What the checker checks of a tensor's raw data, for the tensors it does not see with
    their data: no negative dim, and exactly as many bytes as the shape and type need (the
    checker refuses fewer; more cannot be read as the declared shape)."""
    for init, length in stripped:
        dims = list(init.dims)
        if any(d < 0 for d in dims):
            raise ModelFileError(f"{path or 'model'}: not a valid ONNX model: Negative dimension value "
                                 f"(tensor name: {init.name}, dims {dims})")
        needed = prod(dims) * TO_DTYPE[init.data_type].itemsize
        if length != needed:
            raise ModelFileError(f"{path or 'model'}: not a valid ONNX model: TensorProto (tensor name: "
                                 f"{init.name}) raw_data size ({length} bytes) does not match the declared "
                                 f"shape {dims} and type ({needed} bytes required)")


def _load_external_data(model, path: str) -> None:
    onnx = _onnx()
    if not _has_external_data(model):
        return
    try:
        onnx.external_data_helper.load_external_data_for_model(model, os.path.dirname(os.path.abspath(path)))
    except Exception as exc:
        raise ModelFileError(f"{path}: cannot read the model's external weight data: {_first_line(exc)}") from None


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
    for i, node in enumerate(model.graph.node):
        if node.domain in _DEFAULT_DOMAINS and node.op_type in CONVERTERS:
            continue
        found.setdefault(op_label(node), []).append(node.name or f"#{i}")
    return found


def _check_supported(model, path: str) -> None:
    found = unsupported_ops(model)
    if not found:
        return
    parts = []
    for label, names in found.items():
        shown = ", ".join(repr(n) for n in names[:5]) + (", ..." if len(names) > 5 else "")
        parts.append(f"{label} ({len(names)} node{'s' if len(names) > 1 else ''}: {shown})")
    raise UnsupportedOpError(f"{path or 'model'}: {len(found)} ONNX op type(s) with no converter: "
                             + "; ".join(parts))


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


def _schema_defaults(op_type: str, opset: int) -> dict:
    """The attribute defaults the operator schema in force at ``opset`` declares."""
    key = (op_type, opset)
    if key not in _SCHEMA_DEFAULTS:
        onnx = _onnx()
        defaults = {}
        try:
            schema = onnx.defs.get_schema(op_type, opset, "")
        except Exception:  # an op newer than this onnx package: no defaults to add
            schema = None
        if schema is not None:
            for name, attr in schema.attributes.items():
                if attr.default_value.type != 0:
                    defaults[name] = _python_value(onnx.helper.get_attribute_value(attr.default_value))
        _SCHEMA_DEFAULTS[key] = defaults
    return _SCHEMA_DEFAULTS[key]


def node_attributes(node, opset: int) -> dict:
    onnx = _onnx()
    attrs = dict(_schema_defaults(node.op_type, opset))
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
    """Initializers that are running statistics (BatchNormalization's mean and variance)."""
    return {name for node in model.graph.node if node.op_type == "BatchNormalization"
            for name in node.input[3:5] if name}


def _initializer_tensors(model, path: str, weights: FileWeights | None = None, meta: bool = False) -> tuple:
    """(constants, parameters): {name: Tensor} and {name: (Tensor, kind)}. Arrays are adopted
    as they come (read-only views of the file's or protobuf's bytes), not copied. With
    ``meta``, an initializer whose raw data is in the file (its size checked) and that is
    larger than shape data becomes a meta tensor: nothing is made for it."""
    onnx = _onnx()
    buffers = _buffer_names(model)
    constants, params = {}, {}
    for i, init in enumerate(model.graph.initializer):
        dtype = to_dtype(init.data_type, f"initializer {init.name!r}")
        in_file = weights is not None and weights.spans[i] is not None
        if in_file and meta and prod(init.dims) > SHAPE_DATA_MAX:
            shape = tuple(init.dims)
            tensor = Tensor._make(None, shape, dtype, META)
            if init.name in buffers or not dtype.is_floating_point:
                params[init.name] = (tensor, "buffer")
            else:
                params[init.name] = (Parameter(tensor), "param")
            continue
        if in_file:
            array = weights.array(i, dtype, tuple(init.dims))
        else:
            try:
                array = onnx.numpy_helper.to_array(init)
            except Exception as exc:
                raise ModelFileError(f"{path or 'model'}: initializer {init.name!r} cannot be read: "
                                     f"{_first_line(exc)}") from None
            array = np.asarray(array, dtype=dtype.np)
        tensor = Tensor._make(array, tuple(array.shape), dtype, CPU)
        if array.ndim == 0 or (not dtype.is_floating_point and array.size <= SHAPE_DATA_MAX):
            constants[init.name] = tensor
        elif init.name in buffers or not dtype.is_floating_point:
            params[init.name] = (tensor, "buffer")
        else:
            params[init.name] = (Parameter(tensor), "param")
    return constants, params


# --- conversion --------------------------------------------------------------------------------

class _OnnxTracer(Tracer):
    """The graph tracer, with graph inputs named as the ONNX inputs and the initializers
    registered as named parameters before the trace starts."""

    def __init__(self, fn, input_names: list, params: dict):
        super().__init__(fn)
        self.input_names = input_names
        for name, (tensor, kind) in params.items():
            self.known[id(tensor)] = self.graph.add_parameter(name, tensor, kind)

    def _arg_names(self, args: tuple, kwargs: dict) -> list:
        return list(self.input_names)


class _Conversion:
    """Runs the ONNX nodes through their converters (the function the tracer traces)."""

    def __init__(self, model, constants: dict, params: dict, input_names: list):
        self.model = model
        self.opset = default_opset(model)
        self.values = dict(constants)
        self.values.update((name, t) for name, (t, _) in params.items())
        self.input_names = input_names
        self.tracer = None
        graph = model.graph
        self.used = {name for node in graph.node for name in node.input if name}
        self.used.update(v.name for v in graph.output)

    def __call__(self, *inputs):
        values = self.values
        values.update(zip(self.input_names, inputs))
        for node in self.model.graph.node:
            self._convert(node, values)
        outs = []
        for v in self.model.graph.output:
            if v.name not in values:
                raise ModelFileError(f"graph output {v.name!r} is not computed by any node")
            outs.append(values[v.name])
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _convert(self, node, values: dict) -> None:
        metadata = {p.key: p.value for p in node.metadata_props}
        scope, module_type = naming.node_scope(node.name, metadata)
        ctx = NodeContext(node.op_type, node.name, self.opset, node_attributes(node, self.opset),
                          len(node.output), tuple(bool(name) and name in self.used for name in node.output))
        inputs = []
        for name in node.input:
            if not name:
                inputs.append(None)
            elif name in values:
                inputs.append(values[name])
            else:
                raise ModelFileError(f"{ctx.where} reads {name!r}, which no input, initializer or "
                                     f"earlier node defines")
        while inputs and inputs[-1] is None:
            inputs.pop()
        recorded = self.tracer.graph.nodes
        first = len(recorded)
        try:
            with named_scope(scope):
                result = CONVERTERS[node.op_type](ctx, *inputs)
        except UnsupportedOpError:
            raise
        except FlopcountError as exc:
            raise type(exc)(f"{ctx.where}: {exc}") from exc
        except (ArithmeticError, ValueError, TypeError, IndexError, KeyError) as exc:
            # attribute values or operands no valid file has (a zero step, a negative size)
            raise ModelFileError(f"{ctx.where}: invalid attributes or operands "
                                 f"({type(exc).__name__}: {_first_line(exc)})") from exc
        for n in recorded[first:]:
            n.module_type = module_type
            n.source = node.name
        results = result if isinstance(result, (tuple, list)) else (result,)
        for i, name in enumerate(node.output):
            if i < len(results):
                if name:
                    values[name] = results[i]
            elif name and name in self.used:
                raise ctx.unsupported(f"output {i} ({name!r}) is used but not supported")


def _graph_name(model, path: str) -> str:
    if model.graph.name:
        return model.graph.name
    return os.path.splitext(os.path.basename(path))[0] if path else "onnx"


def import_model(model, input_shapes=None, path: str = "", weights: FileWeights | None = None,
                 meta: bool = False) -> Graph:
    """A Graph from a checked ModelProto whose external data is loaded (``weights``: where the
    raw data the model lacks lies in the file's bytes; ``meta``: see ``load``)."""
    constants, params = _initializer_tensors(model, path, weights, meta)
    declared = _declared_inputs(model, {t.name for t in model.graph.initializer})
    shapes = symbolic.bind([(name, dims) for name, dims, _ in declared], input_shapes)
    dtypes = [to_dtype(code, f"graph input {name!r}") for name, _, code in declared]
    names = [name for name, _, _ in declared]
    conversion = _Conversion(model, constants, params, names)
    tracer = _OnnxTracer(conversion, names, params)
    conversion.tracer = tracer
    examples = tuple(empty(*shape, dtype=dtype, device="meta") for shape, dtype in zip(shapes, dtypes))
    graph = dce(tracer.run(examples, {}))
    conversion.tracer = None  # no cycle keeps the conversion's tensors alive until a collection
    graph.name = _graph_name(model, path)
    return graph.to("meta") if meta else graph


def load(path, input_shapes=None, device=None) -> Graph:
    """Import the ONNX model at ``path`` as a Graph (see the module docstring).

    ``input_shapes`` binds symbolic input dims: ``{"input_ids": (1, 128)}``, a list of shapes in
    input order, or one shape for a one-input model. ``path`` may also be an ``onnx.ModelProto``.
    ``device="meta"`` counts without weights: the graph's parameters are meta tensors and no
    array is made for weights whose raw data is in the file (their sizes are still checked);
    small initializers keep their values, which converters may read at import time (shape
    data, scales, bounds). Otherwise the graph is on the CPU (``graph.to(device)`` moves it).

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
    _check_supported(model, path)
    _validate(model, path, data, weights)
    del data  # the file's bytes, unless the weights' arrays are views of them
    if path:
        _load_external_data(model, path)
    return import_model(model, input_shapes, path, weights, meta)
