"""The ``cpu`` profile: this machine, measured on the spot (once per process).

A CPU has no datasheet figure that numpy reaches, so the profile is what numpy does here, now:
a float32 and a float64 GEMM (the BLAS numpy links, with its threads), an elementwise multiply
on arrays that fit in cache (the vector rate), and a copy of an array far larger than the
caches (the memory bandwidth, bytes read plus written). Each is the best of a few runs: the
roofline is a bound, and a noisy neighbour only ever slows a run down. It takes about a
quarter of a second.
"""

from __future__ import annotations

import functools
import os

import numpy as np

from ..runtime import clock
from .profile import Profile

GEMM_SIZE = 512               # 2·512³ = 268 MFLOP per product: well past BLAS's start-up cost
VECTOR_ELEMENTS = 1 << 13     # 32 KiB of float32 per operand: in the L1/L2 caches
COPY_BYTES = 64 * 1024 * 1024  # past any last-level cache
REPEATS = 5


def _best(fn, repeats: int = REPEATS) -> float:
    """The shortest of ``repeats`` timed calls, in seconds (one untimed call first), on the
    clock of timed runs (``runtime/clock.py``: the thread's CPU time when measured inside
    ``threads.limited(1)``, as the calibration does, else wall time)."""
    fn()
    best = float("inf")
    for _ in range(repeats):
        start = clock.read()
        fn()
        best = min(best, clock.read() - start)
    return best


def _gemm_flops(dtype) -> float:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((GEMM_SIZE, GEMM_SIZE)).astype(dtype)
    b = rng.standard_normal((GEMM_SIZE, GEMM_SIZE)).astype(dtype)
    out = np.empty((GEMM_SIZE, GEMM_SIZE), dtype)
    return 2 * GEMM_SIZE ** 3 / _best(lambda: np.matmul(a, b, out=out))


def _vector_flops() -> float:
    a = np.full(VECTOR_ELEMENTS, 1.0001, np.float32)
    b = np.full(VECTOR_ELEMENTS, 0.9999, np.float32)
    out = np.empty_like(a)
    inner = 64  # many cache-resident passes per timing, so the timer's own cost fades

    def passes():
        for _ in range(inner):
            np.multiply(a, b, out=out)

    return inner * VECTOR_ELEMENTS / _best(passes)


def _copy_bandwidth() -> float:
    src = np.ones(COPY_BYTES // 8, np.float64)
    dst = np.empty_like(src)
    return 2 * COPY_BYTES / _best(lambda: np.copyto(dst, src))


def _memory_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # not a POSIX system
        return 0


@functools.lru_cache(maxsize=1)
def measure() -> Profile:
    """This machine's profile, measured once per process.

    >>> from flopcount import hardware
    >>> cpu = hardware.get("cpu")
    >>> cpu.measured and cpu.peak("float32") > 0
    True
    """
    f32 = _gemm_flops(np.float32)
    cores = os.cpu_count() or 1
    return Profile(
        "cpu", f"this machine's CPU ({cores} cores, measured)",
        # float16 and bfloat16 compute widened to float32 on numpy (Backend.compute_dtypes)
        peak_flops={"float64": _gemm_flops(np.float64), "float32": f32, "float16": f32, "bfloat16": f32},
        vector_flops=_vector_flops(), memory_bandwidth=_copy_bandwidth(), memory_bytes=_memory_bytes(),
        intra_node_bandwidth=0.0, inter_node_bandwidth=0.0, devices_per_node=1,
        intra_node_link="none", node="this machine", measured=True)
