"""Data types: one small object per dtype, named and promoted as in PyTorch."""

from __future__ import annotations

import numpy as np


class DType:
    """A tensor element type (``rt.float32``); wraps the numpy dtype that holds the data."""

    __slots__ = ("name", "np", "itemsize", "is_floating_point", "is_complex", "_rank")

    def __init__(self, name: str, np_dtype: np.dtype, rank: int):
        self.name = name
        self.np = np.dtype(np_dtype)
        self.itemsize = self.np.itemsize
        self.is_floating_point = self.np.kind == "f"
        self.is_complex = False
        self._rank = rank  # category for promotion: 0 bool, 1 integer, 2 floating

    def __repr__(self) -> str:
        return f"flopcount.{self.name}"

    def __reduce__(self):
        return (get_dtype, (self.name,))


bool_ = DType("bool", np.bool_, 0)
uint8 = DType("uint8", np.uint8, 1)
int8 = DType("int8", np.int8, 1)
int16 = DType("int16", np.int16, 1)
int32 = DType("int32", np.int32, 1)
int64 = DType("int64", np.int64, 1)
float16 = DType("float16", np.float16, 2)
float32 = DType("float32", np.float32, 2)
float64 = DType("float64", np.float64, 2)

ALL = (bool_, uint8, int8, int16, int32, int64, float16, float32, float64)
_BY_NAME = {d.name: d for d in ALL}
_BY_NAME.update({"half": float16, "float": float32, "double": float64, "long": int64, "int": int32})
_BY_NP = {d.np: d for d in ALL}

default_float = float32


def get_dtype(value) -> DType:
    """Turn a DType, a name ('float32'), a numpy dtype or a Python type into a DType."""
    if isinstance(value, DType):
        return value
    if isinstance(value, str):
        try:
            return _BY_NAME[value]
        except KeyError:
            raise TypeError(f"unknown dtype {value!r}; known: {sorted(_BY_NAME)}") from None
    if value is float:
        return default_float
    if value is int:
        return int64
    if value is bool:
        return bool_
    try:
        return _BY_NP[np.dtype(value)]
    except (KeyError, TypeError):
        raise TypeError(f"unsupported dtype {value!r}") from None


def promote(a: DType, b: DType) -> DType:
    """Result dtype of a binary op between two tensors, by PyTorch's rule: across categories
    (bool < integer < floating) the higher category's dtype wins (int64 * float32 -> float32);
    within one, numpy's table (int32 + int64 -> int64, float16 + float32 -> float32)."""
    if a is b:
        return a
    if a._rank != b._rank:
        return a if a._rank > b._rank else b
    return _BY_NP[np.promote_types(a.np, b.np)]


def scalar_dtype(value, other: DType) -> DType:
    """Dtype a Python scalar takes next to a tensor of dtype ``other`` (a scalar never widens
    a tensor of the same category: float32 * 2.0 stays float32, int32 + 1 stays int32)."""
    if isinstance(value, bool):
        rank = 0
    elif isinstance(value, (int, np.integer)):
        rank = 1
    else:
        rank = 2
    if rank <= other._rank:
        return other
    return int64 if rank == 1 else default_float
