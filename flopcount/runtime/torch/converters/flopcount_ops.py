"""flopcount's own torch operators, which a capture puts where ATen would spell the same work
in many ops: ``flopcount::cache_append`` (a KV cache's growth, ``cache_append.py``) and
``flopcount::attention`` (a fused attention the recorder keeps whole, ``fused_attention.py``)."""

from __future__ import annotations

from ...nn import functional as F
from ._base import converter
from .nn import _gqa, _mask


@converter("flopcount.cache_append")
def cache_append(ctx, cached, new):
    """Priced as the new rows only (``runtime/ops/cache.py``)."""
    return F.cache_append(cached, new)


@converter("flopcount.attention")
def attention(ctx, query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
              enable_gqa=False):
    return F.scaled_dot_product_attention(query, key, value, attn_mask=_mask(attn_mask), dropout_p=dropout_p,
                                          is_causal=is_causal, scale=scale,
                                          enable_gqa=enable_gqa or _gqa(query, key))
