"""The tensors of a safetensors file (any producer: ``save_pretrained``, ``safetensors.torch``)
as read-only numpy views of the file mapped into memory, each in its stored dtype.

Nothing is copied or converted: a bfloat16 weight stays bfloat16 (``ml_dtypes``), and only the
pages a computation touches are read. safetensors' own numpy reader copies every tensor and has
no bfloat16 or float8, so the views are made here, from the header ``native._read_header``
has checked against the file's size (every tensor must lie inside the file).

    tensors = map_tensors("model.safetensors")   # {"embeddings.word_embeddings.weight": array}
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as _dt
from ..errors import ModelFileError
from .files import open_model_file
from .native import _read_header

_NUMPY = {"BOOL": np.bool_, "U8": np.uint8, "I8": np.int8, "I16": np.int16, "U16": np.uint16,
          "F16": np.float16, "BF16": _dt.bfloat16.np, "I32": np.int32, "U32": np.uint32, "F32": np.float32,
          "I64": np.int64, "U64": np.uint64, "F64": np.float64, "F8_E4M3": _dt.float8_e4m3fn.np,
          "F8_E5M2": _dt.float8_e5m2.np, "F8_E4M3FNUZ": _dt.float8_e4m3fnuz.np,
          "F8_E5M2FNUZ": _dt.float8_e5m2fnuz.np}


def map_tensors(path: str) -> dict:
    """{name: read-only array} of every tensor in the safetensors file at ``path``."""
    header, _ = _read_header(path)
    with open_model_file(path) as f:
        start = 8 + int.from_bytes(f.read(8), "little")
    names = [k for k in header if k != "__metadata__"]
    if not names:
        return {}
    try:
        data = np.memmap(path, dtype=np.uint8, mode="r")
    except (OSError, ValueError) as exc:
        raise ModelFileError(f"{path}: cannot map the file ({type(exc).__name__}: {exc})") from None
    out = {}
    for name in names:
        info = header[name]
        dtype = _NUMPY.get(info["dtype"])
        if dtype is None:
            raise ModelFileError(f"{path}: tensor {name!r} has dtype {info['dtype']}, which flopcount does not read")
        begin, end = (int(o) for o in info["data_offsets"])
        raw = data[start + begin:start + end]
        out[name] = raw.view(dtype).reshape([int(s) for s in info["shape"]])
    return out


__all__ = ["map_tensors"]
