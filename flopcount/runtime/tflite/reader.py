"""A ``.tflite`` file read into plain Python records: tensors (shape, dtype, quantization, the
buffer's bytes as a read-only numpy view) and operators (builtin name, inputs, outputs,
options) of the main subgraph. Only the flatbuffer is read; nothing in it runs.

    model = read("mobilenet.tflite")
    model.operators[0].op, model.tensors[model.inputs[0]].shape   # 'CONV_2D', (1, 224, 224, 3)

The ``tflite`` package (the flatbuffer schema's generated code) decodes the file lazily, so a
truncated or corrupted file fails while it is read here: every such failure is one
ModelFileError naming the file.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

import numpy as np

from ..errors import ModelFileError
from ..optional import require
from ..io.files import open_model_file

IDENTIFIER = b"TFL3"   # the schema's file identifier, bytes 4..8 of every .tflite file
INSTALL = "pip install tflite"
META_KEEP = 4096        # on meta, constants up to this many values keep them (shapes, axes, paddings)

# TensorType code -> numpy dtype name (the ones flopcount's runtime has)
_NUMPY_TYPES = {"FLOAT32": "float32", "FLOAT16": "float16", "FLOAT64": "float64", "INT8": "int8",
                "UINT8": "uint8", "INT16": "int16", "INT32": "int32", "INT64": "int64", "BOOL": "bool",
                "UINT16": "uint16", "UINT32": "uint32"}


@dataclass
class Quantization:
    """Affine quantization: real = scale * (q - zero_point), one value or one per index of ``axis``."""

    scale: np.ndarray
    zero_point: np.ndarray
    axis: int = 0

    @property
    def per_tensor(self) -> bool:
        return self.scale.size == 1


@dataclass
class TensorRecord:
    name: str
    shape: tuple
    dtype: str | None                 # a numpy dtype name (None: see ``unsupported``)
    data: np.ndarray | None = None    # the buffer's values (read-only view); None for activations and on meta
    quant: Quantization | None = None
    constant: bool = False            # the file holds its values (a weight, a bias, a shape)
    unsupported: str = ""             # the TensorType flopcount has no dtype for ('STRING'), if so


@dataclass
class OperatorRecord:
    op: str                           # builtin operator name: 'CONV_2D'
    inputs: list                      # tensor indices, -1 for an omitted optional input
    outputs: list
    options: object = None            # the op's options table (tflite.Conv2DOptions...), or None
    index: int = 0


@dataclass
class TfliteModel:
    name: str
    tensors: list
    operators: list
    inputs: list
    outputs: list
    notes: list = field(default_factory=list)


def tflite_package():
    """The ``tflite`` package, or a one-line ModelFileError naming how to install it."""
    return require("tflite", f"reading TensorFlow Lite files needs the tflite package: {INSTALL}", ModelFileError)


def is_tflite(head: bytes) -> bool:
    """Whether the first bytes of a file are a TFLite flatbuffer's (root offset, then ``TFL3``)."""
    return len(head) >= 8 and head[4:8] == IDENTIFIER


def read(path: str, meta: bool = False) -> TfliteModel:
    """The main subgraph of the TFLite file at ``path``; with ``meta`` no weight array is made
    (``data`` holds None for tensors larger than a few values; sizes are still checked)."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise ModelFileError(f"{path}: no such file")
    if os.path.isdir(path):
        raise ModelFileError(f"{path}: is a directory, not a TensorFlow Lite file")
    tflite = tflite_package()
    with open_model_file(path) as f:
        data = f.read()
    if not is_tflite(data[:8]):
        raise ModelFileError(f"{path}: not a TensorFlow Lite file (no 'TFL3' identifier at bytes 4..8)")
    try:
        return _decode(tflite, data, path, meta)
    except ModelFileError:
        raise
    except Exception as exc:  # noqa: BLE001  (flatbuffers reading past the end, bad offsets, bad enum values)
        raise ModelFileError(f"{path}: not a readable TensorFlow Lite model (truncated or corrupted: "
                             f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})") from None


def _enum_names(enum_class) -> dict:
    return {v: k for k, v in vars(enum_class).items() if not k.startswith("_") and isinstance(v, int)}


def _decode(tflite, data: bytes, path: str, meta: bool) -> TfliteModel:
    model = tflite.Model.GetRootAs(data, 0)
    if model.SubgraphsLength() < 1:
        raise ModelFileError(f"{path}: the TensorFlow Lite model has no subgraph")
    graph = model.Subgraphs(0)
    notes = []
    if model.SubgraphsLength() > 1:
        notes.append(f"the file has {model.SubgraphsLength()} subgraphs: only the main one is counted")
    type_names = _enum_names(tflite.TensorType)
    op_names = _enum_names(tflite.BuiltinOperator)
    codes = []
    for i in range(model.OperatorCodesLength()):
        code = model.OperatorCodes(i)
        builtin = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())
        name = op_names.get(builtin, f"BUILTIN_{builtin}")
        if name == "CUSTOM":
            custom = code.CustomCode()
            name = f"CUSTOM:{custom.decode('utf-8', 'replace') if custom else '?'}"
        codes.append(name)
    tensors = [_tensor(tflite, model, graph.Tensors(i), i, type_names, data, path, meta)
               for i in range(graph.TensorsLength())]
    operators = []
    for i in range(graph.OperatorsLength()):
        op = graph.Operators(i)
        if not 0 <= op.OpcodeIndex() < len(codes):
            raise ModelFileError(f"{path}: operator {i} names opcode {op.OpcodeIndex()}, the file has {len(codes)}")
        ins = [int(t) for t in op.InputsAsNumpy()] if op.InputsLength() else []
        outs = [int(t) for t in op.OutputsAsNumpy()] if op.OutputsLength() else []
        for t in ins + outs:
            if not -1 <= t < len(tensors):
                raise ModelFileError(f"{path}: operator {i} ({codes[op.OpcodeIndex()]}) names tensor {t}, the "
                                     f"subgraph has {len(tensors)}")
        operators.append(OperatorRecord(codes[op.OpcodeIndex()], ins, outs, _options(tflite, op), i))
    inputs = [int(t) for t in graph.InputsAsNumpy()] if graph.InputsLength() else []
    outputs = [int(t) for t in graph.OutputsAsNumpy()] if graph.OutputsLength() else []
    for t in inputs + outputs:
        if not 0 <= t < len(tensors):
            raise ModelFileError(f"{path}: a graph input or output names tensor {t}, the subgraph has {len(tensors)}")
    name = graph.Name().decode("utf-8", "replace") if graph.Name() else ""
    return TfliteModel(name or os.path.splitext(os.path.basename(path))[0], tensors, operators, inputs,
                       outputs, notes)


def _tensor(tflite, model, t, index: int, type_names: dict, data: bytes, path: str, meta: bool) -> TensorRecord:
    name = t.Name().decode("utf-8", "replace") if t.Name() else f"tensor_{index}"
    type_name = type_names.get(t.Type(), str(t.Type()))
    if type_name not in _NUMPY_TYPES:  # strings, resources, complex: refused where an op uses them
        shape = tuple(int(d) for d in t.ShapeAsNumpy()) if t.ShapeLength() else ()
        return TensorRecord(name, shape, None, unsupported=type_name)
    dtype = np.dtype(_NUMPY_TYPES[type_name])
    shape = tuple(int(d) for d in t.ShapeAsNumpy()) if t.ShapeLength() else ()
    if any(d < 0 for d in shape):
        raise ModelFileError(f"{path}: tensor {name!r} has a negative dimension in {shape}")
    record = TensorRecord(name, shape, dtype.name, None, _quantization(t.Quantization()))
    raw = _buffer_bytes(model, t.Buffer(), data, path, name)
    if raw is not None:
        want = math.prod(shape) * dtype.itemsize
        if raw.size != want:
            raise ModelFileError(f"{path}: tensor {name!r} of shape {shape} and type {type_name} needs {want} "
                                 f"bytes, its buffer has {raw.size}")
        record.constant = True
        if not (meta and math.prod(shape) > META_KEEP):
            array = raw.view(dtype).reshape(shape)
            if not array.flags.aligned:
                array = array.copy()
            array.flags.writeable = False
            record.data = array
    return record


def _buffer_bytes(model, index: int, data: bytes, path: str, name: str) -> np.ndarray | None:
    """The bytes of buffer ``index`` as a uint8 view of the file (None: no data, an activation)."""
    if index == 0 or index >= model.BuffersLength():
        return None  # buffer 0 is the schema's empty sentinel
    buffer = model.Buffers(index)
    offset, size = buffer.Offset(), buffer.Size()
    if offset > 1:  # data after the flatbuffer (files over 2 GiB)
        if offset + size > len(data):
            raise ModelFileError(f"{path}: tensor {name!r}'s data lies past the end of the file (truncated)")
        return np.frombuffer(data, np.uint8, size, offset)
    if buffer.DataIsNone() or buffer.DataLength() == 0:
        return None
    return buffer.DataAsNumpy()


def _quantization(q) -> Quantization | None:
    if q is None or q.ScaleLength() == 0:
        return None
    scale = np.array(q.ScaleAsNumpy(), np.float32)
    zero = np.array(q.ZeroPointAsNumpy(), np.int64) if q.ZeroPointLength() else np.zeros(scale.size, np.int64)
    if zero.size not in (1, scale.size):
        raise ValueError(f"{scale.size} scales and {zero.size} zero points")
    return Quantization(scale, zero, int(q.QuantizedDimension()))


# option table class per builtin options type name ('Conv2DOptions')
def _options(tflite, op):
    kind = op.BuiltinOptionsType()
    if kind == 0:
        return None
    names = _enum_names(tflite.BuiltinOptions)
    cls = getattr(tflite, names.get(kind, ""), None)
    table = op.BuiltinOptions()
    if cls is None or table is None:
        return None
    options = cls()
    options.Init(table.Bytes, table.Pos)
    return options
