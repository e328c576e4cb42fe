"""Data types: one small object per dtype, named and promoted as in PyTorch.

numpy has no bfloat16, float8 or 4-bit integers; ``ml_dtypes`` (the package JAX and TensorFlow
use) adds them as numpy dtypes, so their tensors are ordinary numpy arrays. Two sizes:

* ``bits``: the element's size in a packed tensor, which every byte count reads (a 4-bit
  integer is half a byte: ``int4.nbytes(1000) == 500``);
* ``itemsize``: what one element takes in the numpy array holding it (``ml_dtypes`` keeps int4
  in a byte). It matters only to kernels sizing their scratch memory, never to a count.

Promotion follows ``torch.promote_types``: across categories (bool < integer < floating) the
higher category wins; within one, the wider type, and float16 with bfloat16 gives float32.
Like PyTorch, the float8 types promote with nothing but themselves, and uint16, uint32,
uint64, int4 and uint4 only with themselves and with the (non-float8) floating types: a
mixed expression must cast explicitly (``x.to(rt.float32)``), and the error says so.
(PyTorch asserts internally on int4 with another type; we give it uint4's rule.)

>>> import flopcount.runtime as rt
>>> rt.promote_types(rt.bfloat16, rt.float16), rt.int4.bits, rt.int4.nbytes(1000)
(flopcount.float32, 4, 500)
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from .errors import ShapeError

BOOL, INTEGER, FLOATING = 0, 1, 2  # promotion categories, in PyTorch's order


class DType:
    """A tensor element type (``rt.float32``); wraps the numpy dtype that holds the data.

    >>> import flopcount.runtime as rt
    >>> rt.bfloat16.bits, rt.bfloat16.itemsize, rt.bfloat16.is_floating_point
    (16, 2, True)
    """

    __slots__ = ("name", "np", "bits", "itemsize", "is_floating_point", "is_complex", "is_signed",
                 "_rank", "_promotes")

    def __init__(self, name: str, np_dtype, rank: int, bits: int | None = None, promotes: str = "all"):
        self.name = name
        self.np = np.dtype(np_dtype)
        self.itemsize = self.np.itemsize
        self.bits = bits if bits is not None else 8 * self.itemsize
        self.is_floating_point = rank == FLOATING
        self.is_complex = False
        self.is_signed = rank == FLOATING or (rank == INTEGER and not name.startswith("uint"))
        self._rank = rank
        # "all": PyTorch's usual rule; "floats": only with itself and non-float8 floating types;
        # "self": only with itself (the float8 types)
        self._promotes = promotes

    def nbytes(self, numel: int) -> int:
        """Bytes that ``numel`` elements take packed (rounded up to whole bytes)."""
        return (numel * self.bits + 7) // 8

    def __repr__(self) -> str:
        return f"flopcount.{self.name}"

    def __reduce__(self):
        return (get_dtype, (self.name,))


bool_ = DType("bool", np.bool_, BOOL)
uint8 = DType("uint8", np.uint8, INTEGER)
int8 = DType("int8", np.int8, INTEGER)
int16 = DType("int16", np.int16, INTEGER)
int32 = DType("int32", np.int32, INTEGER)
int64 = DType("int64", np.int64, INTEGER)
uint16 = DType("uint16", np.uint16, INTEGER, promotes="floats")
uint32 = DType("uint32", np.uint32, INTEGER, promotes="floats")
uint64 = DType("uint64", np.uint64, INTEGER, promotes="floats")
int4 = DType("int4", ml_dtypes.int4, INTEGER, bits=4, promotes="floats")
uint4 = DType("uint4", ml_dtypes.uint4, INTEGER, bits=4, promotes="floats")
float16 = DType("float16", np.float16, FLOATING)
bfloat16 = DType("bfloat16", ml_dtypes.bfloat16, FLOATING)
float32 = DType("float32", np.float32, FLOATING)
float64 = DType("float64", np.float64, FLOATING)
float8_e4m3fn = DType("float8_e4m3fn", ml_dtypes.float8_e4m3fn, FLOATING, promotes="self")
float8_e5m2 = DType("float8_e5m2", ml_dtypes.float8_e5m2, FLOATING, promotes="self")
float8_e4m3fnuz = DType("float8_e4m3fnuz", ml_dtypes.float8_e4m3fnuz, FLOATING, promotes="self")
float8_e5m2fnuz = DType("float8_e5m2fnuz", ml_dtypes.float8_e5m2fnuz, FLOATING, promotes="self")
# the narrow types of microscaling (MX) formats and 2-bit weights: ONNX's FLOAT4E2M1 (no
# infinities or NaN), FLOAT8E8M0 (a power-of-two scale) and INT2 / UINT2. Like float8 and
# int4, they promote with nothing but themselves (the floats) or floating types (the ints)
float4_e2m1fn = DType("float4_e2m1fn", ml_dtypes.float4_e2m1fn, FLOATING, bits=4, promotes="self")
float8_e8m0fnu = DType("float8_e8m0fnu", ml_dtypes.float8_e8m0fnu, FLOATING, promotes="self")
int2 = DType("int2", ml_dtypes.int2, INTEGER, bits=2, promotes="floats")
uint2 = DType("uint2", ml_dtypes.uint2, INTEGER, bits=2, promotes="floats")

ALL = (bool_, uint8, int8, int16, int32, int64, uint16, uint32, uint64, int4, uint4, int2, uint2,
       float16, bfloat16, float32, float64, float8_e4m3fn, float8_e5m2, float8_e4m3fnuz,
       float8_e5m2fnuz, float4_e2m1fn, float8_e8m0fnu)
FLOAT8 = (float8_e4m3fn, float8_e5m2, float8_e4m3fnuz, float8_e5m2fnuz)
_BY_NAME = {d.name: d for d in ALL}
# PyTorch's aliases, and the short names people type on a command line (bf16, fp16; fp8 as
# serving engines' KV cache options spell it: e4m3 unless e5m2 is named)
_BY_NAME.update({"half": float16, "float": float32, "double": float64, "long": int64, "int": int32,
                 "short": int16, "bf16": bfloat16, "fp16": float16, "fp32": float32, "fp64": float64,
                 "fp8": float8_e4m3fn, "fp8_e4m3": float8_e4m3fn, "fp8_e5m2": float8_e5m2})
_BY_NP = {d.np: d for d in ALL}
NUMPY_DTYPES = frozenset(_BY_NP)  # the numpy dtypes that hold a runtime dtype

default_float = float32


class BlockDType(DType):
    """Weights stored in blocks: every ``block`` consecutive elements of a row take
    ``block_bytes`` bytes, their scales (and mins) inside, as GGUF's formats store them (Q4_K:
    256 weights in 144 bytes). A tensor of it has its logical shape (out, in); its array holds
    the raw blocks, (out, in / block * block_bytes) bytes, and ``decode`` turns such an array
    into float32 (out, in). ``bits`` is the bits per weight, scales included.

    >>> q = block_dtype("q4_k", 256, 144)
    >>> q.bits, q.nbytes(4096 * 4096)
    (4.5, 9437184)
    """

    __slots__ = ("block", "block_bytes", "decode")

    def __init__(self, name: str, block: int, block_bytes: int, decode=None):
        super().__init__(name, np.uint8, INTEGER, promotes="self")
        self.bits = 8 * block_bytes / block
        self.block, self.block_bytes, self.decode = block, block_bytes, decode
        self.is_signed = False

    def nbytes(self, numel: int) -> int:
        return -(-numel // self.block) * self.block_bytes

    def decoded(self, raw):
        """float32 elements of ``raw`` blocks (last axis: a row's bytes), on the host: decoders
        are numpy code (a device array is copied over first)."""
        if self.decode is None:
            raise ShapeError(f"{self.name}: no decoder for this block format is loaded (the reader of its "
                             f"file format registers one)")
        return self.decode(raw.get() if hasattr(raw, "get") else raw)

    def row_bytes(self, columns: int) -> int:
        """Bytes of one row of ``columns`` elements (a whole number of blocks)."""
        if columns % self.block:
            raise ShapeError(f"{self.name}: a row of {columns} elements is not a whole number of "
                             f"{self.block}-element blocks")
        return columns // self.block * self.block_bytes


def block_dtype(name: str, block: int, block_bytes: int, decode=None) -> BlockDType:
    """The block format ``name`` (registered on first use, so ``get_dtype(name)`` finds it); a
    name taken by another format is a TypeError."""
    known = _BY_NAME.get(name)
    if known is not None:
        if not (isinstance(known, BlockDType) and (known.block, known.block_bytes) == (block, block_bytes)):
            raise TypeError(f"dtype {name!r} is already defined otherwise")
        if decode is not None and known.decode is None:
            known.decode = decode
        return known
    made = BlockDType(name, block, block_bytes, decode)
    _BY_NAME[name] = made
    return made


def names() -> list[str]:
    """Every dtype name ``get_dtype`` takes, aliases included."""
    return sorted(_BY_NAME)


def get_dtype(value) -> DType:
    """Turn a DType, a name ('float32', 'bf16'), a numpy dtype or a Python type into a DType."""
    if isinstance(value, DType):
        return value
    if isinstance(value, str):
        try:
            return _BY_NAME[value]
        except KeyError:
            raise TypeError(f"unknown dtype {value!r}; known: {names()}") from None
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


def _promotes_with(a: DType, b: DType) -> bool:
    if a._promotes == "self":
        return False
    if a._promotes == "floats":
        return b.is_floating_point and b._promotes != "self"
    return True


def promote(a: DType, b: DType) -> DType:
    """Result dtype of a binary op between two tensors, by PyTorch's rule: across categories
    (bool < integer < floating) the higher category's dtype wins (int64 * float32 -> float32);
    within one, the wider type (int32 + int64 -> int64, float16 + float32 -> float32), and
    float16 + bfloat16 -> float32. Pairs PyTorch refuses (float8 with anything else, uint16
    with int32...) raise a ShapeError asking for an explicit cast."""
    if a is b:
        return a
    if not (_promotes_with(a, b) and _promotes_with(b, a)):
        raise ShapeError(f"no implicit type promotion between {a.name} and {b.name} (as in PyTorch); "
                         f"cast one of them explicitly, e.g. with .to(rt.{b.name})")
    if a._rank != b._rank:
        return a if a._rank > b._rank else b
    if {a, b} == {float16, bfloat16}:
        return float32  # neither holds the other: bfloat16 has the range, float16 the precision
    return _BY_NP[np.promote_types(a.np, b.np)]


def scalar_dtype(value, other: DType) -> DType:
    """Dtype a Python scalar takes next to a tensor of dtype ``other`` (a scalar never widens
    a tensor of the same category: float32 * 2.0 stays float32, int32 + 1 stays int32)."""
    if isinstance(value, bool):
        rank = BOOL
    elif isinstance(value, (int, np.integer)):
        rank = INTEGER
    else:
        rank = FLOATING
    if rank <= other._rank:
        return other
    return int64 if rank == INTEGER else default_float
