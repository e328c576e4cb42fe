"""ONNX tensor element types (``TensorProto.DataType`` codes) and the runtime's dtypes.

The codes are ONNX's stable enum values, written here so this table needs no ``onnx`` import.
"""

from __future__ import annotations

from .. import dtypes as _dt
from ..errors import UnsupportedOpError

# TensorProto.DataType -> runtime dtype, for every type the runtime can hold
TO_DTYPE = {
    1: _dt.float32, 2: _dt.uint8, 3: _dt.int8, 5: _dt.int16, 6: _dt.int32, 7: _dt.int64,
    9: _dt.bool_, 10: _dt.float16, 11: _dt.float64,
}
FROM_DTYPE = {d.name: code for code, d in TO_DTYPE.items()}

# names of the codes the runtime has no dtype for, for error messages
_OTHER_NAMES = {0: "UNDEFINED", 4: "UINT16", 8: "STRING", 12: "UINT32", 13: "UINT64", 14: "COMPLEX64",
                15: "COMPLEX128", 16: "BFLOAT16"}


def type_name(code: int) -> str:
    """ONNX's name of an element type code (``FLOAT``, ``INT64``...)."""
    if code in TO_DTYPE:
        return {1: "FLOAT", 2: "UINT8", 3: "INT8", 5: "INT16", 6: "INT32", 7: "INT64", 9: "BOOL",
                10: "FLOAT16", 11: "DOUBLE"}[code]
    return _OTHER_NAMES.get(code, f"type {code}")


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
