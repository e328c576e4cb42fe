"""Roofline times of an LLM phase on a device: per op max(FLOPs / peak, bytes / bandwidth).

Each op runs alone at the device's dense peak for the model's dtype or its memory bandwidth,
whichever it hits first: compute-bound when its arithmetic intensity (FLOPs per byte moved) is
above the ridge peak / bandwidth, memory-bound below. A step's time is the sum over its ops (no
overlap between kernels), so it is a bound, not a prediction of a tuned engine's time.

Over a generation each op's FLOPs and bytes are affine in the context (``generation.py``), so
its compute and memory times are two lines; their maximum summed over the steps is exact:
split at the step where the lines cross.

Totals: time to first token (the prefill), time per output token (the mean decode step),
tokens per second (batch / time per output token), and whether the weights and the KV cache
at the end of the phase fit in the device's memory.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .step import Counts

COMPUTE, MEMORY = "compute", "memory"


@dataclass(frozen=True)
class Device:
    """What the roofline needs of a device: its name, peak FLOP/s for the dtype counted, memory
    bandwidth in bytes/s and memory size in bytes."""

    name: str
    peak_flops: float
    bandwidth: float
    memory: int

    @property
    def ridge(self) -> float:
        """The intensity (FLOP/byte) above which an op is compute-bound."""
        return self.peak_flops / self.bandwidth


def op_time(counts: Counts, device: Device) -> tuple[float, str]:
    """(seconds, "compute" or "memory") of one op."""
    compute, memory = counts.flops / device.peak_flops, counts.bytes / device.bandwidth
    return (compute, COMPUTE) if compute > memory else (memory, MEMORY)


def _line_sum(start: float, slope: float, first: int, stop: int) -> float:
    """Σ_{i=first}^{stop-1} (start + slope·i)."""
    n = stop - first
    return n * start + slope * (first + stop - 1) * n / 2 if n > 0 else 0.0


def sum_of_max(a: tuple, b: tuple, steps: int) -> float:
    """Σ_{i<steps} max(a0 + a1·i, b0 + b1·i): the two lines cross at most once."""
    (a0, a1), (b0, b1) = a, b
    if a1 == b1:
        return _line_sum(max(a0, b0), a1, 0, steps)
    cross = min(max(math.ceil((b0 - a0) / (a1 - b1)), 0), steps)  # first i where the slopes' order decides
    before, after = (b, a) if a1 > b1 else (a, b)   # which line is above before the crossing
    return _line_sum(*before, 0, cross) + _line_sum(*after, cross, steps)


@dataclass
class StepTimes:
    """A traced step's op times and bounds, and their sum."""

    seconds: float
    ops: list = field(default_factory=list)     # (seconds, bound) per op, in the step's order


@dataclass
class PhaseTimes:
    """The roofline of a phase on ``device``."""

    device: Device
    prefill: StepTimes | None = None
    first_decode: StepTimes | None = None
    last_decode: StepTimes | None = None
    decode_seconds: float = 0.0                 # every decode step
    decode_steps: int = 0
    batch: int = 1
    fits: bool = True
    needed_bytes: int = 0                       # weights and the final KV cache

    @property
    def time_to_first_token(self) -> float | None:
        return self.prefill.seconds if self.prefill is not None else None

    @property
    def time_per_output_token(self) -> float | None:
        return self.decode_seconds / self.decode_steps if self.decode_steps else None

    @property
    def tokens_per_second(self) -> float | None:
        """Decode throughput over the batch: batch / time per output token."""
        tpot = self.time_per_output_token
        return self.batch / tpot if tpot else None


def step_times(step, device: Device) -> StepTimes:
    ops = [op_time(op, device) for op in step.ops]
    return StepTimes(sum(t for t, _ in ops), ops)


def decode_seconds(decode, device: Device) -> float:
    """Σ over every decode step and op of the op's roofline time (exact, see the module docstring)."""
    total = 0.0
    for piece in decode.pieces:
        for base, slope in zip(piece.base, piece.slope):
            compute = (base.flops / device.peak_flops, slope.flops / device.peak_flops)
            memory = (base.bytes / device.bandwidth, slope.bytes / device.bandwidth)
            total += sum_of_max(compute, memory, piece.steps)
    return total


def phase_times(report, hardware) -> PhaseTimes:
    """The roofline of ``report``'s phase on ``hardware`` (a Device, or a profile name)."""
    device = hardware if isinstance(hardware, Device) else device_for(hardware, report.dtype)
    times = PhaseTimes(device=device, batch=report.batch)
    if report.prefill is not None:
        times.prefill = step_times(report.prefill, device)
    if report.decode is not None:
        times.first_decode = step_times(report.decode.first, device)
        times.last_decode = step_times(report.decode.last, device)
        times.decode_seconds = decode_seconds(report.decode, device)
        times.decode_steps = len(report.decode.contexts)
    times.needed_bytes = report.weight_bytes + report.kv_cache_bytes
    times.fits = times.needed_bytes <= device.memory
    return times


def device_for(name: str, dtype: str) -> Device:
    """The Device of hardware profile ``name`` for ``dtype`` (``flopcount.hardware``: its dense
    matrix peak for that dtype, its memory bandwidth and size)."""
    from .. import hardware

    profile = hardware.get(name)
    return Device(name=profile.name, peak_flops=profile.peak(dtype), bandwidth=profile.memory_bandwidth,
                  memory=profile.memory_bytes)
