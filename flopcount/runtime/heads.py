"""How attention lays out its heads, for the attention op's kernels on every device: how many
query heads share a key/value head (grouped-query attention), the key/value heads repeated to
match, and the default scale.

    heads_ratio(q, k, enable_gqa=True)   # 4 for 32 query heads over 8 key/value heads
"""

from __future__ import annotations

import math


def heads_ratio(q, k, enable_gqa: bool) -> int:
    """How many query heads share one key/value head (1 unless grouped-query attention)."""
    if enable_gqa and q.ndim >= 3 and k.ndim >= 3 and q.shape[-3] != k.shape[-3]:
        return q.shape[-3] // k.shape[-3]
    return 1


def repeat_heads(xp, t, rep: int):
    """Key/value head j serves query heads j·rep ... j·rep + rep − 1."""
    return xp.repeat(t, rep, axis=-3) if rep > 1 else t


def scale_of(q, scale):
    """The scores' scale: ``scale``, or 1 / sqrt(head dim) when None."""
    return 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale


__all__ = ["heads_ratio", "repeat_heads", "scale_of"]
