"""Native model files: ONE safetensors file holding the tensors, with the graph as JSON in the
file's metadata (format name and version, inputs, ops, attrs, scopes, outputs) and a SHA-256 of
that JSON, so a damaged header is caught. A state dict is the same kind of file without a graph.

Nothing is unpickled. Before any tensor is read, the header is checked against the file: a
declared tensor that does not fit in the file is refused before memory is allocated for it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections import OrderedDict
from math import prod

import numpy as np

from .. import dtypes as _dt
from ..device import META, Device
from ..errors import FlopcountError, ModelFileError
from .files import open_model_file
from .json_text import NestedTooDeeply, parse_json
from ..registry import get_op
from ..tensor import Tensor

FORMAT = "flopcount"
VERSION = 1
_MAX_HEADER = 100 * 1024 * 1024  # bytes; a real header is far smaller
_ITEMSIZE = {"BOOL": 1, "U8": 1, "I8": 1, "I16": 2, "U16": 2, "F16": 2, "BF16": 2, "I32": 4, "U32": 4,
             "F32": 4, "I64": 8, "U64": 8, "F64": 8, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E4M3FNUZ": 1,
             "F8_E5M2FNUZ": 1}
# safetensors' numpy reader looks these up as attributes of numpy, where they are not (ml_dtypes
# holds them): their bytes are read from the checked offsets and viewed in the dtype
_FLOAT8 = {"F8_E4M3": _dt.float8_e4m3fn, "F8_E5M2": _dt.float8_e5m2, "F8_E4M3FNUZ": _dt.float8_e4m3fnuz,
           "F8_E5M2FNUZ": _dt.float8_e5m2fnuz}
# safetensors has no 4- and 2-bit integers: they are stored one per byte (I8 / U8), and the
# document names their dtype ("stored_as"), so they load back as int4 / uint4 / int2 / uint2;
# nor float4_e2m1fn and float8_e8m0fnu: their bytes are stored as U8 and viewed back
_WIDER_IN_FILE = {_dt.int4: np.int8, _dt.uint4: np.uint8, _dt.int2: np.int8, _dt.uint2: np.uint8}
_BYTES_IN_FILE = (_dt.float4_e2m1fn, _dt.float8_e8m0fnu)


# --- attrs <-> JSON --------------------------------------------------------------------------

def encode_attr(value):
    """An attr as JSON: tuples are arrays; lists, dicts, dtypes and devices are tagged objects."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, tuple):
        return [encode_attr(v) for v in value]
    if isinstance(value, list):
        return {"list": [encode_attr(v) for v in value]}
    if isinstance(value, dict):
        return {"dict": [[encode_attr(k), encode_attr(v)] for k, v in value.items()]}
    if isinstance(value, _dt.DType):
        return {"dtype": value.name}
    if isinstance(value, Device):
        return {"device": str(value)}
    raise TypeError(f"save: an attr of type {type(value).__name__} ({value!r}) cannot be stored")


def decode_attr(value):
    if isinstance(value, list):
        return tuple(decode_attr(v) for v in value)
    if isinstance(value, dict):
        if "list" in value:
            return [decode_attr(v) for v in value["list"]]
        if "dict" in value:
            return {decode_attr(k): decode_attr(v) for k, v in value["dict"]}
        if "dtype" in value:
            return _dt.get_dtype(value["dtype"])
        if "device" in value:
            from ..device import device

            return device(value["device"])
        raise ValueError(f"unknown tagged attr {sorted(value)}")
    return value


# --- saving ----------------------------------------------------------------------------------

def _value_json(v) -> dict:
    return {"name": v.name, "shape": list(v.shape), "dtype": v.dtype.name}


def graph_to_json(graph) -> dict:
    """The graph as a JSON-friendly dict (tensor data not included)."""
    params = []
    for v in graph.parameters.values():
        t = graph.tensors[v.name]
        params.append({**_value_json(v), "kind": v.kind, "data": t.data is not None,
                       "requires_grad": bool(t.requires_grad)})
    return {
        "format": FORMAT, "version": VERSION, "name": graph.name,
        "inputs": [_value_json(v) for v in graph.inputs], "input_tree": graph.input_tree,
        "parameters": params,
        "constants": [_value_json(v) for v in graph.constants.values()],
        "nodes": [{"op": n.op.name,
                   "inputs": [None if v is None else v.name for v in n.inputs],
                   "outputs": [_value_json(v) for v in n.outputs],
                   "attrs": {k: encode_attr(a) for k, a in n.attrs.items()},
                   "scope": n.scope, "module_type": n.module_type,
                   **({"mac_dtype": n.mac_dtype} if n.mac_dtype else {})} for n in graph.nodes],
        "outputs": [v.name for v in graph.outputs], "output_tree": graph.output_tree,
    }


def _host(t) -> np.ndarray:
    if not isinstance(t, Tensor):
        arr = np.asarray(t)
    else:  # a meta constant carries its value as a numpy array
        # (a constant folded by a reduction may hold a numpy scalar, not a 0-d array)
        arr = np.asarray(t.data) if t.device.type == "meta" else np.asarray(t.numpy())
    return arr if arr.flags.c_contiguous else arr.copy()  # (ascontiguousarray makes 0-d 1-d)


def save(obj, path, example_inputs: tuple | None = None) -> None:
    """Write a Graph, a Module (traced on ``example_inputs``) or a state dict to ONE file.

    >>> import flopcount.runtime as rt, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "lin.safetensors")
    >>> rt.save(rt.nn.Linear(4, 2), path, example_inputs=(rt.randn(1, 4),))
    >>> [n.op_name for n in rt.load(path).nodes]
    ['linear']
    """
    from ..graph import Graph, GraphModule, LazyGraph, trace
    from ..nn.modules.module import Module

    if isinstance(obj, LazyGraph):
        if obj.graph is None:
            raise TypeError("save: this rt.compile(module) has not been called yet, so it has no graph")
        obj = obj.graph
    if isinstance(obj, GraphModule):
        obj = obj.graph
    if isinstance(obj, Module):
        if example_inputs is None:
            raise TypeError("save(module, path) needs example_inputs=(...) to trace the module; "
                            "or save module.state_dict() for the weights alone")
        obj = trace(obj, *example_inputs)
    if isinstance(obj, Graph):
        doc = graph_to_json(obj)
        tensors = {name: _host(obj.tensors[name]) for name in list(obj.parameters) + list(obj.constants)
                   if obj.tensors[name].data is not None}
        kind = "graph"
    elif isinstance(obj, dict):
        tensors = {str(k): _host(v) for k, v in obj.items()}
        doc = {"format": FORMAT, "version": VERSION, "names": list(tensors)}
        kind = "state_dict"
    else:
        raise TypeError(f"save: expects a Graph, a Module or a state dict, got {type(obj).__name__}")
    stored_as = {}
    for name, arr in tensors.items():
        dtype = _dt.get_dtype(arr.dtype)
        if dtype in _WIDER_IN_FILE:
            tensors[name] = arr.astype(_WIDER_IN_FILE[dtype])
            stored_as[name] = dtype.name
        elif dtype in _BYTES_IN_FILE:
            tensors[name] = np.ascontiguousarray(arr).view(np.uint8)
            stored_as[name] = dtype.name
    if stored_as:
        doc["stored_as"] = stored_as
    text = json.dumps(doc, separators=(",", ":"))
    metadata = {"format": FORMAT, "format_version": str(VERSION), "kind": kind, "graph": text,
                "graph_sha256": hashlib.sha256(text.encode()).hexdigest()}
    from safetensors.numpy import save_file

    save_file(tensors, os.fspath(path), metadata=metadata)


# --- loading ---------------------------------------------------------------------------------

def _read_header(path: str) -> tuple[dict, dict]:
    """(tensor table, metadata) of a safetensors file, checked against the file's size."""
    if not os.path.isfile(path):
        raise ModelFileError(f"{path}: no such file")
    size = os.path.getsize(path)
    with open_model_file(path) as f:
        head = f.read(8)
        if len(head) < 8:
            raise ModelFileError(f"{path}: {size} bytes is too short to be a safetensors file")
        n = int.from_bytes(head, "little")
        if n > size - 8 or n > _MAX_HEADER:
            raise ModelFileError(f"{path}: not a safetensors file or truncated (header declares {n} "
                                 f"bytes, the file has {size - 8} after the length field)")
        raw = f.read(n)
    try:
        header = parse_json(raw.decode("utf-8"))
    except NestedTooDeeply as exc:
        raise ModelFileError(f"{path}: not a safetensors header (a flat table of tensors): {exc}") from None
    except (UnicodeDecodeError, ValueError):
        raise ModelFileError(f"{path}: the safetensors header is not valid JSON "
                             f"(not a safetensors file, or a corrupted one)") from None
    if not isinstance(header, dict):
        raise ModelFileError(f"{path}: the safetensors header is not a JSON object")
    data_bytes = size - 8 - n
    for key, info in header.items():
        if key == "__metadata__":
            continue
        try:
            itemsize = _ITEMSIZE[info["dtype"]]
            shape = [int(s) for s in info["shape"]]
            begin, end = (int(o) for o in info["data_offsets"])
        except (KeyError, TypeError, ValueError):
            raise ModelFileError(f"{path}: tensor {key!r} has a malformed entry in the header") from None
        need = prod(shape) * itemsize
        if any(s < 0 for s in shape) or not 0 <= begin <= end or end - begin != need:
            raise ModelFileError(f"{path}: tensor {key!r} declares shape {shape} ({need} bytes) "
                                 f"but data offsets [{begin}, {end}]")
        if end > data_bytes:
            raise ModelFileError(f"{path}: tensor {key!r} needs bytes up to {end} but the file holds "
                                 f"only {data_bytes} bytes of data (truncated?)")
    meta = header.get("__metadata__") or {}
    if not isinstance(meta, dict):
        raise ModelFileError(f"{path}: the safetensors metadata is not a JSON object")
    return header, meta


def _read_doc(path: str) -> tuple[dict, dict, str]:
    header, meta = _read_header(path)
    if meta.get("format") != FORMAT:
        raise ModelFileError(f"{path}: a safetensors file, but not a flopcount model file "
                             f"(metadata format {meta.get('format')!r})")
    version = str(meta.get("format_version", "?"))
    # ASCII digits of a sane length only: str.isdigit() takes '²', int() refuses 5000 digits
    if not re.fullmatch(r"[0-9]{1,9}", version):
        shown = repr(version) if len(version) <= 40 else repr(version[:40]) + f"... ({len(version)} characters)"
        raise ModelFileError(f"{path}: format version {shown} is not a version number")
    if int(version) > VERSION:
        raise ModelFileError(f"{path}: format version {version!r} is newer than this flopcount reads ({VERSION})")
    text = meta.get("graph")
    if not isinstance(text, str) or hashlib.sha256(text.encode()).hexdigest() != meta.get("graph_sha256"):
        raise ModelFileError(f"{path}: the graph header is corrupted (its SHA-256 checksum does not match)")
    try:
        doc = parse_json(text)
    except ValueError:
        raise ModelFileError(f"{path}: the graph header is not valid JSON") from None
    if not isinstance(doc, dict):
        raise ModelFileError(f"{path}: the graph header is not a JSON object")
    return header, doc, meta.get("kind", "graph")


def _read_tensors(path: str, names, header: dict, doc: dict) -> dict:
    """The named tensors, in their dtypes (``header`` was checked against the file's size)."""
    from safetensors import safe_open

    out = {}
    try:
        with safe_open(path, framework="numpy") as f:
            for name in names:
                if name not in header or header[name]["dtype"] not in _FLOAT8:
                    out[name] = f.get_tensor(name)
    except Exception as exc:  # the library raises its own error types; name the file and why
        raise ModelFileError(f"{path}: cannot read tensors ({type(exc).__name__}: {exc})") from None
    with open_model_file(path) as f:
        data_start = 8 + int.from_bytes(f.read(8), "little")
    for name in names:
        if name not in out:
            info = header[name]
            begin, end = (int(o) for o in info["data_offsets"])
            raw = np.fromfile(path, dtype=np.uint8, count=end - begin, offset=data_start + begin)
            out[name] = raw.view(_FLOAT8[info["dtype"]].np).reshape([int(n) for n in info["shape"]])
    stored_as = doc.get("stored_as") or {}
    if not isinstance(stored_as, dict):
        raise ModelFileError(f"{path}: 'stored_as' in the graph header is not a JSON object")
    for name, dtype_name in stored_as.items():
        if name in out:
            try:
                dtype = _dt.get_dtype(dtype_name)
            except TypeError:
                raise ModelFileError(f"{path}: tensor {name!r} is stored as unknown dtype {dtype_name!r}") from None
            if dtype in _BYTES_IN_FILE and out[name].dtype == np.uint8:
                out[name] = out[name].view(dtype.np)
            else:
                out[name] = out[name].astype(dtype.np)
    return out


def load_state_dict(path) -> "OrderedDict[str, Tensor]":
    """The tensors of a state-dict file (or the parameters of a graph file), as CPU tensors."""
    path = os.fspath(path)
    header, doc, kind = _read_doc(path)
    if kind == "graph":
        names = [p["name"] for p in doc.get("parameters", []) if p.get("data")]
    else:  # the saved order (the header's is alphabetical)
        names = doc.get("names") or [k for k in header if k != "__metadata__"]
    arrays = _read_tensors(path, names, header, doc)
    return OrderedDict((k, _to_tensor(arrays[k])) for k in names)


def _to_tensor(arr: np.ndarray) -> Tensor:
    from ..device import CPU

    return Tensor._make(arr, tuple(arr.shape), _dt.get_dtype(arr.dtype), CPU)


def load(path):
    """The Graph stored in a native file; it runs without the Python class that made it."""
    path = os.fspath(path)
    header, doc, kind = _read_doc(path)
    if kind != "graph":
        raise ModelFileError(f"{path}: holds a state dict, not a graph; use rt.load_state_dict()")
    names = [k for k in header if k != "__metadata__"]
    arrays = _read_tensors(path, names, header, doc)
    try:
        graph = graph_from_json(doc, arrays)
        graph.validate()
    except (FlopcountError, KeyError, TypeError, ValueError, IndexError, AttributeError, ArithmeticError,
            RecursionError) as exc:
        detail = f"missing entry {exc}" if isinstance(exc, KeyError) else str(exc)
        raise ModelFileError(f"{path}: the stored graph is inconsistent: {detail}") from None
    return graph


def graph_from_json(doc: dict, arrays: dict):
    """Rebuild a Graph from ``graph_to_json``'s dict and the tensor arrays by name."""
    from ..graph.ir import Graph, Node, Value

    g = Graph()
    g.name = doc["name"]
    if not isinstance(g.name, str):
        raise ValueError(f"the graph name {g.name!r} is not a string")
    values: dict = {}

    def define(entry, kind):
        name = entry["name"]
        if not isinstance(name, str) or not isinstance(entry["dtype"], str):
            raise ValueError(f"a value has name {name!r} and dtype {entry['dtype']!r}; both must be strings")
        if name in values:
            raise ValueError(f"the name {name!r} is defined twice")
        shape = entry["shape"]
        if not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape):
            raise ValueError(f"value {name!r} has shape {shape}: dims must be non-negative integers")
        g._names.add(name)
        v = values[name] = Value(name, tuple(shape), _dt.get_dtype(entry["dtype"]), kind)
        return v

    for e in doc["inputs"]:
        g.inputs.append(define(e, "input"))
    g.input_tree = doc["input_tree"]
    for e in doc["parameters"]:
        v = define(e, e["kind"])
        if e["data"]:
            t = _checked(arrays, v)
        else:
            t = Tensor._make(None, v.shape, v.dtype, META)
        t.requires_grad = bool(e.get("requires_grad")) and v.dtype.is_floating_point
        g.parameters[v.name] = v
        g.tensors[v.name] = t
    for e in doc["constants"]:
        v = define(e, "const")
        g.constants[v.name] = v
        g.tensors[v.name] = _checked(arrays, v)
    for i, e in enumerate(doc["nodes"]):
        try:
            op = get_op(e["op"])
        except (KeyError, TypeError):
            raise ValueError(f"node {i} uses op {e['op']!r}, which this flopcount does not have") from None
        inputs = [None if name is None else values[name] for name in e["inputs"]]
        outputs = [define(o, "node") for o in e["outputs"]]
        attrs = {k: decode_attr(a) for k, a in e["attrs"].items()}
        scope, module_type = e.get("scope", ""), e.get("module_type", "")
        if not isinstance(scope, str) or not isinstance(module_type, str):
            raise ValueError(f"node {i} has scope {scope!r} and module type {module_type!r}; both must be strings")
        mac_dtype = e.get("mac_dtype")
        if mac_dtype is not None and not isinstance(mac_dtype, str):
            raise ValueError(f"node {i} has mac_dtype {mac_dtype!r}; it must be a string")
        g.nodes.append(Node(op, inputs, outputs, attrs, scope, module_type, mac_dtype=mac_dtype))
    g.outputs = [values[name] for name in doc["outputs"]]
    g.output_tree = doc["output_tree"]
    _check_tree(g.input_tree, len(g.inputs), "input")
    _check_tree(g.output_tree, len(g.outputs), "output")
    return g


def _check_tree(tree, leaves: int, what: str) -> None:
    """A stored input/output tree uses each of the ``leaves`` tensors exactly once."""
    from ..graph.tree import unflatten

    try:
        seen = []
        unflatten(tree, _Recorder(seen))
    except (KeyError, TypeError, ValueError, IndexError, AttributeError, RecursionError):
        raise ValueError(f"the {what} tree is malformed") from None
    if sorted(seen) != list(range(leaves)):
        raise ValueError(f"the {what} tree refers to tensors {sorted(seen)}, but the graph has {leaves} {what}(s)")
    if what == "input" and not (isinstance(tree, dict) and len(tree.get("tuple", ())) == 2):
        raise ValueError("the input tree is not (args, kwargs)")


class _Recorder:
    """Stands for the leaves list in ``unflatten``: records which indices a tree reads."""

    def __init__(self, seen: list):
        self.seen = seen

    def __getitem__(self, i):
        if type(i) is not int:
            raise TypeError(i)
        self.seen.append(i)
        return i


def _checked(arrays: dict, v) -> Tensor:
    if v.name not in arrays:
        raise ValueError(f"tensor {v.name!r} is listed in the graph but missing from the file")
    arr = arrays[v.name]
    if tuple(arr.shape) != v.shape or arr.dtype != v.dtype.np:
        raise ValueError(f"tensor {v.name!r} is {arr.dtype}{list(arr.shape)} in the file, the graph "
                         f"says {v.dtype.name}{list(v.shape)}")
    return _to_tensor(arr)
