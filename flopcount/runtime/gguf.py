"""GGUF files (llama.cpp, Ollama, LM Studio): the header and the tensor table, read with the
``gguf`` package, the tensors' bytes only mapped (nothing is read until a weight is used).

Every tensor keeps the format the file stores it in: ``F32``, ``F16`` and ``BF16`` as those
dtypes, and each quantized type (Q4_K, Q6_K, Q8_0, IQ2_XXS, MXFP4...) as a block format
(``dtypes.BlockDType``) of ggml's block size and bytes per block, scales included (Q4_K: 256
weights in 144 bytes, 4.5 bits each), decoded by the package's own dequantizer when the model
runs. So parameter memory, and the bytes every layer reads, are the file's.

    f = read("llama-3-8b.Q4_K_M.gguf")
    f.architecture, f.metadata["llama.block_count"], f.tensors[0].dtype    # 'llama', 32, q4_k
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from . import dtypes as _dt
from .errors import ModelFileError
from .io.files import open_model_file
from .optional import require

GGUF_INSTALL = "pip install gguf"
MAGIC = b"GGUF"
LONG_ARRAY = 256   # metadata arrays longer than this (a tokenizer's vocabulary) keep only their length


@dataclass(frozen=True)
class GGUFTensor:
    """One entry of the tensor table: ``shape`` in PyTorch's order (rows first; the file
    writes ggml's, reversed), its ``dtype`` (a block format for quantized types), its size in
    the file, and ``raw``: the mapped bytes (a numpy memmap: rows of raw blocks, or the values
    of a float tensor)."""

    name: str
    shape: tuple
    dtype: _dt.DType
    nbytes: int
    raw: object

    @property
    def numel(self) -> int:
        return int(np.prod(self.shape)) if self.shape else 1


@dataclass(frozen=True)
class GGUFFile:
    """What a GGUF file declares: ``metadata`` {key: value} (long arrays as their length under
    ``key + ".length"``), its ``tensors`` in file order, and its ``architecture``."""

    path: str
    metadata: dict
    tensors: list

    @property
    def architecture(self) -> str:
        return str(self.metadata.get("general.architecture", ""))

    def tensor(self, name: str) -> GGUFTensor | None:
        return next((t for t in self.tensors if t.name == name), None)


def is_gguf(path: str) -> bool:
    """Whether the file at ``path`` starts with GGUF's magic."""
    with open_model_file(path) as f:
        return f.read(4) == MAGIC


def _package():
    return require("gguf", f"reading GGUF files needs the gguf package: {GGUF_INSTALL}", ModelFileError)


def read(path) -> GGUFFile:
    """The header and tensor table of the GGUF file at ``path``; a file that is not one, or is
    cut short, is one ModelFileError naming it."""
    path = os.fspath(path)
    gguf = _package()
    try:
        reader = gguf.GGUFReader(path, "r")
        metadata = {name: _value(field) for name, field in reader.fields.items()}
        metadata.update((f"{name}.length", len(field.data)) for name, field in reader.fields.items()
                        if _is_array(gguf, field) and len(field.data) > LONG_ARRAY)
        tensors = [_tensor(gguf, t) for t in reader.tensors]
    except ModelFileError:
        raise
    except (ValueError, OSError, KeyError, IndexError, TypeError, AssertionError) as exc:
        text = " ".join(str(exc).split())[:200]
        raise ModelFileError(f"{path}: not a readable GGUF file ({type(exc).__name__}: {text})") from None
    for t in tensors:
        if t.dtype.nbytes(t.numel) != t.nbytes:
            raise ModelFileError(f"{path}: tensor {t.name!r} of shape {t.shape} in {t.dtype.name} should take "
                                 f"{t.dtype.nbytes(t.numel)} bytes, the file gives it {t.nbytes}")
    return GGUFFile(path, metadata, tensors)


def _is_array(gguf, field) -> bool:
    return bool(field.types) and field.types[0] == gguf.GGUFValueType.ARRAY


def _value(field):
    if len(field.types) and field.types[0].name == "ARRAY" and len(field.data) > LONG_ARRAY:
        return None   # a vocabulary or merges list: its length is kept beside it
    value = field.contents()
    return value.item() if isinstance(value, np.generic) else value


_FLOAT_TYPES = {"F32": _dt.float32, "F16": _dt.float16, "BF16": _dt.bfloat16, "F64": _dt.float64,
                "I8": _dt.int8, "I16": _dt.int16, "I32": _dt.int32, "I64": _dt.int64}


def dtype_of(qtype) -> _dt.DType:
    """The runtime dtype of a ggml type: the float and integer types as themselves, every
    quantized type as its block format (registered with the package's dequantizer)."""
    gguf = _package()
    qtype = gguf.GGMLQuantizationType(qtype)
    if qtype.name in _FLOAT_TYPES:
        return _FLOAT_TYPES[qtype.name]
    block, block_bytes = gguf.GGML_QUANT_SIZES[qtype]

    def decode(raw, qtype=qtype):
        return gguf.quants.dequantize(np.ascontiguousarray(raw), qtype).astype(np.float32, copy=False)

    return _dt.block_dtype(qtype.name.lower(), block, block_bytes, decode)


def _tensor(gguf, t) -> GGUFTensor:
    shape = tuple(int(d) for d in reversed(list(t.shape)))
    return GGUFTensor(str(t.name), shape, dtype_of(t.tensor_type), int(t.n_bytes), t.data)


def array_of(tensor: GGUFTensor) -> np.ndarray:
    """The tensor's data as the runtime holds it: a float tensor's values in its shape, a block
    format's raw blocks (rows, bytes per row). Read from the mapping only now."""
    if isinstance(tensor.dtype, _dt.BlockDType):
        rows = int(np.prod(tensor.shape[:-1])) if len(tensor.shape) > 1 else 1
        raw = np.asarray(tensor.raw).reshape(rows, -1)
        return raw.reshape(tuple(tensor.shape[:-1]) + (raw.shape[-1],))
    raw = np.asarray(tensor.raw)
    if raw.dtype != tensor.dtype.np:
        raw = raw.view(tensor.dtype.np)   # BF16 comes as raw 16-bit words
    return raw.reshape(tensor.shape)


__all__ = ["GGUFFile", "GGUFTensor", "read", "is_gguf", "dtype_of", "array_of", "GGUF_INSTALL"]
