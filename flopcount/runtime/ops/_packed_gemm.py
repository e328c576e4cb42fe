"""Matmuls by a model's constant weight through the compiled GEMM on a once-packed weight.

``cpu_kernels/_gemm.py`` says how the kernel works. It is used for float32 numpy operands when
the weight is read-only (an imported model's weights are read-only views of the file's bytes,
which the runtime never writes), and the shape is one where it beat OpenBLAS here (one thread,
AMD EPYC with AVX-512): from ``MIN_ROWS`` to ``MAX_ROWS`` rows of A (the tokens of a
transformer, the pixels of a late conv stage) and at least ``MIN_DEPTH`` deep. With weights
from memory (``benchmarks/packed_gemm.py``; its figures are in benchmarks/RESULTS.md) the gain
is largest at a few rows and shrinks as rows grow, until BLAS is as fast; one row is BLAS's
matrix-vector product, which is faster. Other matmuls run in BLAS.

The packed copy of a weight is kept while the weight's memory lives, as onnxruntime keeps its
prepacked weights; at most ``MAX_PACKED_BYTES`` in all, past which weights run in BLAS.
The panels of columns are split between the process's threads (``_parallel``).
"""

from __future__ import annotations

import weakref
from math import prod

import numpy as np

from .. import cpu_kernels
from . import _parallel

MIN_ROWS = 2
MAX_ROWS = 200
MIN_DEPTH = 128
MAX_POSITIONS = 64
MIN_COLUMNS = 64
MAX_PACKED_BYTES = 2**30
# multiply-adds a thread must get before a hand-off pays (a submit and a wait cost tens of
# microseconds; see _parallel)
_MIN_MACS_PER_THREAD = 1 << 21

_packs: dict = {}  # (address, shape, strides) of a read-only weight -> (weakref to its owner, pack)
_packed_bytes = [0]


def matmul(xp, a, b):
    """``a @ b`` for a (..., m, k) and a read-only weight b (k, n), or None where this path does
    not apply (then BLAS runs it)."""
    m = prod(a.shape[:-1])
    if b.ndim != 2 or a.ndim < 1 or not _takes(xp, m, b, a.dtype):
        return None
    compiled = _compiled()
    if compiled is None:
        return None
    packed = _packed(compiled, b)
    if packed is None:
        return None
    k, n = b.shape
    rows = a.reshape(m, k)  # a view where it can be: the kernel reads any strides
    out = np.empty((m, n), np.float32)
    width = packed.shape[2]
    per_thread = -(-_MIN_MACS_PER_THREAD // (m * k * width))
    _parallel.split(packed.shape[0], lambda start, stop: compiled.gemm(rows, packed, n, out, start, stop),
                    min_per_thread=per_thread)
    return out.reshape(a.shape[:-1] + (n,))


def left_matmul(xp, w, b, out=None):
    """``w @ b`` for a read-only weight w (m, k) and b (k, n), as ``(bᵀ @ wᵀ)ᵀ`` (the columns
    of b, a conv's output positions, are the rows here), written to ``out`` (m, n) where given;
    None where this path does not apply. At most ``MAX_POSITIONS`` columns: the result is
    transposed back by a copy, which cost more than the kernel saved at 196 (a 14x14 map)."""
    if b.ndim != 2 or w.ndim != 2 or b.shape[1] > MAX_POSITIONS:
        return None
    product = matmul(xp, b.T, w.T)
    if product is None:
        return None
    if out is None:
        return product.T.copy()
    out[...] = product.T
    return out


def left_applies(xp, w, columns: int) -> bool:
    """Whether ``left_matmul`` runs ``w`` (m, k) times a matrix of ``columns`` columns of w's
    dtype (rather than returning None)."""
    return (w.ndim == 2 and columns <= MAX_POSITIONS and _takes(xp, columns, w.T, w.dtype)
            and _compiled() is not None)


def _takes(xp, rows: int, b, a_dtype) -> bool:
    """Whether ``rows`` rows of ``a_dtype`` times ``b`` (k, n) suit this path: float32 numpy
    arrays, b read-only, and the shape where the kernel beat BLAS (the kernel itself is asked
    for after this cheaper check)."""
    k, n = b.shape
    return (xp is np and a_dtype == np.float32 and b.dtype == np.float32 and not b.flags.writeable
            and MIN_ROWS <= rows <= MAX_ROWS and k >= MIN_DEPTH and n >= MIN_COLUMNS)


def _compiled():
    compiled = cpu_kernels.kernel("gemm")
    return compiled if compiled is not None and compiled.available() else None


def _owner(b):
    """The array that owns ``b``'s memory: a pack of ``b`` is valid while it lives."""
    owner = b
    while isinstance(owner.base, np.ndarray):
        owner = owner.base
    return owner


def _packed(compiled, b):
    """Read-only ``b`` packed, kept for later calls (None past the byte limit)."""
    owner = _owner(b)
    key = (b.__array_interface__["data"][0], b.shape, b.strides)
    hit = _packs.get(key)
    if hit is not None:
        if hit[0]() is not None:
            return hit[1]
        _forget(key, hit[0])  # its owner died and the memory is someone else's now
    width = compiled.panel_width()
    panels = -(-b.shape[1] // width)
    nbytes = panels * b.shape[0] * width * 4
    if _packed_bytes[0] + nbytes > MAX_PACKED_BYTES:
        return None
    packed = _aligned_empty((panels, b.shape[0], width))
    compiled.pack_weight(b, packed)
    _packs[key] = (weakref.ref(owner, lambda ref, key=key: _forget(key, ref)), packed, nbytes)
    _packed_bytes[0] += nbytes
    return packed


def _aligned_empty(shape: tuple) -> np.ndarray:
    """An uninitialized float32 array starting on a 64-byte cache line. numpy's large arrays
    start 16 bytes past one (the allocator's header), so every 64-byte vector load of a packed
    panel's row would touch two lines."""
    size = prod(shape)
    buffer = np.empty(size + 16, np.float32)
    skip = (-buffer.ctypes.data % 64) // 4
    return buffer[skip:skip + size].reshape(shape)


def _forget(key, ref) -> None:
    entry = _packs.get(key)
    if entry is not None and entry[0] is ref:
        del _packs[key]
        _packed_bytes[0] -= entry[2]
