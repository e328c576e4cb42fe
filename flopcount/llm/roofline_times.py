"""A phase's times on a hardware profile: each op's roofline (``flopcount.hardware.roofline``,
the one roofline), summed over the ops of a step and over the steps of a generation.

Each op runs alone, bound by the profile's compute or its memory bandwidth, whichever it hits
first; a step's time is the sum over its ops (no overlap between kernels), so it is a bound, not
a prediction of a tuned engine's time. MACs are priced at the peak of the model's dtype.

Over a generation each op's MACs, FLOPs and bytes are affine in the context
(``generation.py``), so its compute and memory times are two lines (the roofline is linear in
the counts); their maximum summed over the steps is exact: split at the step where the lines
cross.

Totals: time to first token (the prefill), time per output token (the mean decode step),
tokens per second (batch / time per output token), and whether the weights and the KV cache
at the end of the phase fit in the device's memory.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .. import hardware as hw
from ..hardware import Profile, roofline


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
    ops: list = field(default_factory=list)     # (seconds, "compute" or "memory") per op, in the step's order


@dataclass
class PhaseTimes:
    """The roofline of a phase on ``profile``, MACs priced in ``dtype``."""

    profile: Profile
    dtype: str
    prefill: StepTimes | None = None
    last_decode: StepTimes | None = None
    decode_seconds: float = 0.0                 # every decode step
    decode_steps: int = 0
    batch: int = 1
    fits: bool = True
    needed_bytes: int = 0                       # weights and the final KV cache

    @property
    def peak_flops(self) -> float:
        return self.profile.peak(self.dtype)

    @property
    def ridge(self) -> float:
        return self.profile.ridge(self.dtype)

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


def step_times(step, profile: Profile, dtype: str) -> StepTimes:
    ops = [roofline(op, profile, dtype) for op in step.ops]
    return StepTimes(sum(r.time_s for r in ops), [(r.time_s, r.bound) for r in ops])


def decode_seconds(decode, profile: Profile, dtype: str) -> float:
    """Σ over every decode step and op of the op's roofline time (exact, see the module docstring)."""
    total = 0.0
    for piece in decode.pieces:
        for base, slope in zip(piece.base, piece.slope):
            at_start, per_step = roofline(base, profile, dtype), roofline(slope, profile, dtype)
            total += sum_of_max((at_start.compute_s, per_step.compute_s), (at_start.memory_s, per_step.memory_s),
                                piece.steps)
    return total


def phase_times(report, hardware) -> PhaseTimes:
    """The roofline of ``report``'s phase on ``hardware`` (a ``hardware.Profile``, or a profile
    name such as ``"h100-sxm"``)."""
    profile = hw.get(hardware)
    times = PhaseTimes(profile=profile, dtype=report.dtype, batch=report.batch)
    if report.prefill is not None:
        times.prefill = step_times(report.prefill, profile, report.dtype)
    if report.decode is not None:
        times.last_decode = step_times(report.decode.last, profile, report.dtype)
        times.decode_seconds = decode_seconds(report.decode, profile, report.dtype)
        times.decode_steps = len(report.decode.contexts)
    times.needed_bytes = report.weight_bytes + report.kv_cache_bytes
    times.fits = times.needed_bytes <= profile.memory_bytes
    return times
