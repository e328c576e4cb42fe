"""ONNX tensor element types (``TensorProto.DataType`` codes) and the runtime's dtypes.

The codes are ONNX's stable enum values, written here so this table needs no ``onnx`` import.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as _dt
from ..errors import UnsupportedOpError

# ONNX's name of every element type code (TensorProto.DataType), for messages
NAMES = {
    0: "UNDEFINED", 1: "FLOAT", 2: "UINT8", 3: "INT8", 4: "UINT16", 5: "INT16", 6: "INT32", 7: "INT64",
    8: "STRING", 9: "BOOL", 10: "FLOAT16", 11: "DOUBLE", 12: "UINT32", 13: "UINT64", 14: "COMPLEX64",
    15: "COMPLEX128", 16: "BFLOAT16", 17: "FLOAT8E4M3FN", 18: "FLOAT8E4M3FNUZ", 19: "FLOAT8E5M2",
    20: "FLOAT8E5M2FNUZ", 21: "UINT4", 22: "INT4", 23: "FLOAT4E2M1", 24: "FLOAT8E8M0", 25: "UINT2",
    26: "INT2",
}

# TensorProto.DataType -> runtime dtype, for every type the runtime can hold
TO_DTYPE = {
    1: _dt.float32, 2: _dt.uint8, 3: _dt.int8, 4: _dt.uint16, 5: _dt.int16, 6: _dt.int32, 7: _dt.int64,
    9: _dt.bool_, 10: _dt.float16, 11: _dt.float64, 12: _dt.uint32, 13: _dt.uint64, 16: _dt.bfloat16,
    17: _dt.float8_e4m3fn, 18: _dt.float8_e4m3fnuz, 19: _dt.float8_e5m2, 20: _dt.float8_e5m2fnuz,
    21: _dt.uint4, 22: _dt.int4, 23: _dt.float4_e2m1fn, 24: _dt.float8_e8m0fnu, 25: _dt.uint2, 26: _dt.int2,
}
FROM_DTYPE = {d.name: code for code, d in TO_DTYPE.items()}


def type_name(code: int) -> str:
    """ONNX's name of an element type code (``FLOAT``, ``INT64``, ``FLOAT8E4M3FN``...)."""
    return NAMES.get(code, f"type {code}")


def to_dtype(code: int, what: str):
    """The runtime dtype of ONNX element type ``code``; ``what`` names the value in the error."""
    try:
        return TO_DTYPE[code]
    except KeyError:
        raise UnsupportedOpError(f"{what} has ONNX element type {type_name(code)}, which flopcount's "
                                 f"runtime has no dtype for (supported: "
                                 f"{', '.join(type_name(c) for c in TO_DTYPE)})") from None


def from_dtype(dtype) -> int:
    """The ONNX element type code of a runtime dtype."""
    return FROM_DTYPE[_dt.get_dtype(dtype).name]


def unpack(raw, dtype, numel: int) -> np.ndarray:
    """``numel`` elements of ``dtype`` from an initializer's raw bytes: sub-byte types are packed
    8 / bits to a byte, the first element in the lowest bits (ONNX's layout: two 4-bit numbers,
    four 2-bit ones); numpy (ml_dtypes) holds each in a byte of its own."""
    data = np.frombuffer(raw, np.uint8)
    if dtype.bits >= 8:
        return data.view(dtype.np)[:numel]
    per_byte, mask = 8 // dtype.bits, (1 << dtype.bits) - 1
    fields = np.empty(per_byte * data.size, np.uint8)
    for i in range(per_byte):
        fields[i::per_byte] = (data >> (i * dtype.bits)) & mask
    return fields[:numel].view(dtype.np)
