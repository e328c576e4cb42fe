"""Model states per rank: weights, gradients and the optimizer's state, with ZeRO's partitioning.

Adam by precision (Rajbhandari et al. 2020, "ZeRO", section 3.1): mixed-precision training
keeps 16-bit weights and gradients (2 + 2 bytes per parameter) and an optimizer state of a
float32 copy of the weights, the momentum and the variance (K = 12 bytes): 16 bytes per
parameter. Training in float32 keeps 4 + 4 bytes and the two moments (8). ZeRO partitions
across the data-parallel ranks: stage 1 the optimizer state, stage 2 also the gradients,
stage 3 also the weights.

    >>> s = model_states(7_500_000_000, "bfloat16", zero=1, data=64)
    >>> round(s.weights / 1e9, 1), round(s.gradients / 1e9, 1), round(s.optimizer / 1e9, 2), round(s.total / 1e9, 1)
    (15.0, 15.0, 1.41, 31.4)
"""

from __future__ import annotations

from dataclasses import dataclass

from ..runtime import dtypes as _dt
from ..runtime.errors import ShapeError

ZERO_STAGES = (0, 1, 2, 3)


@dataclass(frozen=True)
class ModelStates:
    """Bytes one rank holds: ``weights``, ``gradients`` and ``optimizer`` state."""

    weights: int
    gradients: int
    optimizer: int

    @property
    def total(self) -> int:
        return self.weights + self.gradients + self.optimizer


def bytes_per_parameter(dtype) -> tuple:
    """(weight, gradient, optimizer state) bytes per parameter for Adam in ``dtype``."""
    dtype = _dt.get_dtype(dtype)
    if dtype.bits == 16:
        return 2, 2, 12  # 16-bit weights and gradients; float32 master weights, momentum, variance
    if dtype.bits == 32:
        return 4, 4, 8   # float32 weights and gradients; momentum and variance
    raise ShapeError(f"training precision must be a 16- or 32-bit float type, got {dtype.name}")


def model_states(params: int, dtype, zero: int = 0, data: int = 1) -> ModelStates:
    """The states of ``params`` parameters (those one rank holds before ZeRO) in ``dtype``,
    with ZeRO ``zero`` over ``data`` data-parallel ranks. A partitioned state is divided by
    the ranks, rounded up (a rank holds whole elements)."""
    if zero not in ZERO_STAGES:
        raise ShapeError(f"ZeRO stage must be one of {ZERO_STAGES}, got {zero!r}")
    w, g, o = bytes_per_parameter(dtype)

    def part(n_bytes: int, partitioned: bool) -> int:
        return -(-n_bytes // data) if partitioned else n_bytes

    return ModelStates(part(w * params, zero >= 3), part(g * params, zero >= 2), part(o * params, zero >= 1))
