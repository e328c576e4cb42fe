"""The roofline: how long a cost takes at best on a profile, and which resource bounds it.

    time = max(compute time, bytes moved / memory bandwidth)
    compute time = 2·MACs / peak(dtype) + (FLOPs − 2·MACs) / vector FLOP/s

MACs run on the matrix units at the dtype's dense peak; the other FLOPs (bias adds, softmax,
norms, activations) on the vector units. An op is compute-bound when its compute time is the
larger, i.e. when its arithmetic intensity (FLOPs per byte) is above the ridge point. The
model is a bound: it assumes every byte moves once at full bandwidth and the units never wait,
so measured time is at least this (a kernel that fuses ops beats the per-op sum).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..runtime import dtypes as _dt
from .profile import Profile

COMPUTE, MEMORY = "compute", "memory"   # what bounds an op: its Roofline's ``bound``


@dataclass(frozen=True)
class Roofline:
    """The roofline of one cost on one profile (seconds, FLOP per byte)."""

    time_s: float
    compute_s: float
    memory_s: float
    bound: str                  # "compute" or "memory" (the larger of the two times)
    intensity: float | None     # FLOPs per byte moved; None when nothing moves
    ridge: float                # the profile's peak for the dtype over its bandwidth
    dtype: str                  # the dtype whose peak priced the MACs


def compute_dtype(dtypes) -> _dt.DType:
    """The dtype an op computes in, from its inputs' dtypes: the widest floating one (bfloat16
    activations times int4 weights multiply in bfloat16), else the widest (int8 x int8 GEMMs).

    >>> from flopcount.runtime import bfloat16, int4, int64
    >>> compute_dtype([bfloat16, int4, int64]).name
    'bfloat16'
    """
    known = [_dt.get_dtype(d) for d in dtypes if d is not None]
    floats = [d for d in known if d.is_floating_point]
    pool = floats or known
    if not pool:
        return _dt.float32
    return max(pool, key=lambda d: d.bits)


def roofline(cost, profile: Profile, dtype) -> Roofline:
    """The roofline of ``cost`` (anything with ``macs``, ``flops``, ``bytes_read`` and
    ``bytes_written``: a ``Cost``, a report row, an op record) on ``profile``, with MACs in
    ``dtype``.

    >>> from flopcount import hardware
    >>> from flopcount.runtime import Cost
    >>> n = 4096  # a bfloat16 GEMM, n x n x n: 2n³ FLOPs, three n x n matrices moved
    >>> r = hardware.roofline(Cost(n ** 3, 2 * n ** 3, 2 * 2 * n * n, 2 * n * n), hardware.get("h100-sxm"), "bfloat16")
    >>> r.bound, round(r.intensity), round(r.time_s * 1e6)
    ('compute', 1365, 139)
    """
    peak = profile.peak(dtype)
    matrix_flops = 2 * cost.macs
    other_flops = max(cost.flops - matrix_flops, 0)
    compute_s = matrix_flops / peak + other_flops / profile.vector_flops
    moved = cost.bytes_read + cost.bytes_written
    memory_s = moved / profile.memory_bandwidth
    bound = COMPUTE if compute_s > memory_s else MEMORY
    return Roofline(time_s=max(compute_s, memory_s), compute_s=compute_s, memory_s=memory_s, bound=bound,
                    intensity=cost.flops / moved if moved else None, ridge=peak / profile.memory_bandwidth,
                    dtype=dtype if isinstance(dtype, str) else _dt.get_dtype(dtype).name)
