"""Keeping freed memory in the process while models run on the CPU.

glibc hands blocks above its mmap threshold straight back to the kernel when they are freed,
and trims the heap's top above its trim threshold. A model's activations are exactly such
blocks: every op allocates its output afresh, so each run pays a page fault per 4 KB of every
temporary (a sigmoid over a million floats took several times as long, most of it in the kernel;
benchmarks/RESULTS.md, "Figures behind design choices in the code").
PyTorch's and onnxruntime's CPU arenas keep freed memory for the next allocation; raising both
thresholds does the same for numpy. The process keeps its peak resident size afterwards, as
those arenas do. Elsewhere than glibc (macOS, musl) nothing changes.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import threading

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
# 1 GiB where glibc accepts it; older ones cap the mmap threshold at 32 MB on 64-bit
_THRESHOLDS = (1 << 30, 32 << 20)

_result: bool | None = None
_lock = threading.Lock()


def keep_freed_memory() -> bool:
    """Ask glibc to keep freed blocks for reuse instead of unmapping them (once per process).

    Returns whether the allocator took the setting; ``False`` where it is not glibc's.

    >>> keep_freed_memory() in (True, False)
    True
    """
    global _result
    with _lock:
        if _result is None:
            _result = _raise_thresholds()
        return _result


def give_back_freed_memory() -> bool:
    """Return the heap's free pages to the kernel (glibc's ``malloc_trim``), unless this process
    keeps freed memory for its runs (:func:`keep_freed_memory`). A parsed model file is
    freed into the heap as one large block among smaller live ones, and glibc would keep it for
    the rest of the process: 80 MB for a 200,000-node ONNX file, half of what counting it
    holds. Returns whether anything was asked of the allocator (``False`` elsewhere than glibc).

    >>> give_back_freed_memory() in (True, False)
    True
    """
    with _lock:
        if _result:
            return False
        try:
            trim = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
        except (OSError, AttributeError):
            return False
        trim.argtypes = (ctypes.c_size_t,)
        trim(0)
        return True


def _raise_thresholds() -> bool:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    for threshold in _THRESHOLDS:
        if mallopt(_M_MMAP_THRESHOLD, threshold):
            return bool(mallopt(_M_TRIM_THRESHOLD, 2 * threshold))
    return False
