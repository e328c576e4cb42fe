"""``histc``: counts of values in equal-width bins (``torch.histc``), as MoE routers count the
tokens each expert gets.

Cost (COUNTING.md): 3 FLOPs per input element: its bin (a subtract and a multiply) and the
count's add; the range check that skips values outside [low, high] goes with the bin.
"""

from __future__ import annotations

__all__ = ["histc"]

import numpy as np

from ..dispatch import apply
from ..errors import ShapeError
from ..registry import Op, Spec, io_cost, numel, register_op


@register_op("histc")
class Histc(Op):
    """Counts of ``x``'s elements in ``bins`` equal bins over [low, high], in ``x``'s dtype: a
    value v goes to bin ⌊(v − low)·bins / (high − low)⌋, ``high`` to the last bin, values outside
    the range nowhere. ``low == high`` takes the data's own range (widened by 1 both ways when
    that is one value, as torch does)."""

    vjp = None  # counts: piecewise constant in x, no gradient

    def shape(x, *, bins, low, high):
        if x.dtype.name == "bool":   # integers are counted as CUDA's histc counts them (CPU's refuses them)
            raise ShapeError(f"histc: expects a numeric tensor, got bool of shape {x.shape}")
        if bins <= 0 or low > high:
            raise ShapeError(f"histc: needs bins > 0 and low <= high, got bins={bins}, range [{low}, {high}]")
        return Spec((bins,), x.dtype, x.device)

    def forward(xp, x, *, bins, low, high):
        flat = x.reshape(-1)
        if low == high:
            low, high = (float(flat.min()), float(flat.max())) if flat.size else (0.0, 0.0)
            if low == high:
                low, high = low - 1, high + 1
        kept = flat[(flat >= low) & (flat <= high)]
        position = ((kept.astype(np.float64) - low) * (bins / (high - low))).astype(np.int64)
        counts = xp.bincount(xp.minimum(position, bins - 1), minlength=bins)
        return counts.astype(x.dtype)

    def cost(out, x, *, bins, low, high):
        return io_cost(out, (x,), flops=3 * numel(x))


def histc(x, bins: int = 100, low: float = 0.0, high: float = 0.0):
    """Counts of ``x``'s values in ``bins`` equal bins over [low, high] (both 0: the data's range).

    >>> histc(rt.tensor([0.5, 1.5, 1.7, 9.0]), bins=2, low=0.0, high=2.0).tolist()
    [1.0, 2.0]
    """
    return apply(Histc, x, bins=int(bins), low=float(low), high=float(high))
