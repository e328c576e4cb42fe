"""Reading an ONNX file: the ModelProto, its weights as arrays over the file's bytes, and the
external data of its tensors from side files in the model's folder (never outside it).

Weights are not copied out of the file: ``wire.py`` finds where each initializer's raw data
lies in the file's bytes, protobuf parses the rest, and the arrays are read-only views of the
file's bytes (copied only where the data is not aligned for its type, as the kernels want it).
The runtime's in-place methods copy such an array before writing (copy-on-write), so an
imported graph can still be trained or loaded with a state dict. A missing, truncated or
corrupted file, or one that is not ONNX, is a ModelFileError naming the file.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import stat
import sys
from math import prod

import numpy as np

from ..errors import ModelFileError
from ..graph.importing import first_line
from ..io.files import open_model_file
from . import wire
from .elem_types import TO_DTYPE, unpack
from .model import all_tensors, onnx_package

# integer initializers up to this many elements are shape data (Reshape targets, axes, ids)
SHAPE_DATA_MAX = 4096


def read_model(path: str):
    """The ModelProto of ``path`` without its external data; a ModelFileError when the file is
    missing or is not a readable ONNX model. The raw data of plain initializers may be left
    out of it (see ``read_file``)."""
    return read_file(path)[0]


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
        return _adopted(np.frombuffer(self.data, dtype=dtype.np, count=length // dtype.itemsize, offset=offset)
                        .reshape(dims))


def _adopted(array: np.ndarray) -> np.ndarray:
    """``array``, a view of a file's bytes, as the graph's: read-only (the runtime's in-place
    methods copy it first), or a copy where it is unaligned (kernels take slow paths on it) or
    small (shape data: a view would keep the whole file alive for it)."""
    if not array.flags.aligned or array.size <= SHAPE_DATA_MAX:
        return array.copy()
    array.flags.writeable = False
    return array


def read_file(path: str, meta: bool = False) -> tuple:
    """(ModelProto, the file's bytes, FileWeights or None). The file is read once. When its
    layout allows (``wire.py``), protobuf parses the file without its weights' raw data, which
    the arrays then take from the file's bytes (FileWeights); otherwise the whole file. With
    ``meta`` (no weight arrays wanted) the file is mapped rather than read, so only the pages
    the structure lies on are touched."""
    onnx = onnx_package()
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


def load_external_data(model, path: str) -> dict:
    """Read the external data of every tensor in ``model`` from the model's own folder. onnx's
    reader refuses a location that leaves the folder (``..``, an absolute path, a symlink out)
    and an offset or length beyond the file; a model given without a path has no folder, so
    its external data is refused rather than looked for in the working directory.

    The graph's initializers of numeric types are not read into the model but mapped: returned
    as {name: read-only array over the side file}, whose pages are read when a run touches them
    (loading them into protobuf and then into arrays held the weights twice: 2.5 GiB of weights
    peaked at 5.2 GB)."""
    onnx = onnx_package()
    external = [t for t in all_tensors(model) if t.data_location == onnx.TensorProto.EXTERNAL]
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
    return _adopted(np.frombuffer(files[file], dtype=dtype.np, count=prod(dims), offset=offset).reshape(dims))


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
