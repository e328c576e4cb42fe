"""``flopcount::cache_append`` (a KV cache's growth, ``runtime/torch/cache_append.py``) as the
runtime's ``cache_append`` op, priced as the new rows only."""

from __future__ import annotations

from ...nn import functional as F
from ._base import converter


@converter("flopcount.cache_append")
def cache_append(ctx, cached, new):
    return F.cache_append(cached, new)
