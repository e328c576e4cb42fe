"""Reusable scratch buffers for kernel temporaries that never outlive the kernel call (column
buffers, padded planes, wide-grid outputs).

numpy takes a large array from ``mmap`` and gives it back on free, so the next array of that
size is fresh memory whose pages fault in one by one as they are first written: filling a new
im2col buffer costs more in page faults than in copying (benchmarks/RESULTS.md, "Figures behind
design choices in the code"). Each thread keeps
one buffer per role, grown to the largest size asked for, and hands out views of it; a kernel
asks for each role once per call, so its temporaries never alias. On other array modules (CuPy
has its own memory pool) this is a plain ``empty``.
"""

from __future__ import annotations

import threading
from math import prod

import numpy as np

# a larger temporary is allocated as usual: a thread should not hold hundreds of MB for good
MAX_BYTES = 64 * 2**20

_local = threading.local()


def scratch(xp, role: str, shape: tuple, dtype):
    """An uninitialized array of ``shape`` and ``dtype`` backed by this thread's ``role``
    buffer; valid until the next request for the same role."""
    dtype = np.dtype(dtype)
    nbytes = prod(shape) * dtype.itemsize
    if xp is not np or nbytes > MAX_BYTES:
        return xp.empty(shape, dtype=dtype)
    buffers = getattr(_local, "buffers", None)
    if buffers is None:
        buffers = _local.buffers = {}
    buf = buffers.get(role)
    if buf is None or buf.nbytes < nbytes:
        buf = buffers[role] = np.empty(max(nbytes, 1), dtype=np.uint8)
    return buf[:nbytes].view(dtype).reshape(shape)


def scratch_zeros(xp, role: str, shape: tuple, dtype):
    """``scratch`` filled with zeros."""
    out = scratch(xp, role, shape, dtype)
    out.fill(0)
    return out


def release() -> None:
    """Drop this thread's scratch buffers (they are made again when next asked for)."""
    _local.buffers = {}
