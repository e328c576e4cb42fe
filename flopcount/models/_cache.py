"""The KV cache the decoders take and return (``past_key_values``), as transformers' DynamicCache.

A cache is a list with one ``(keys, values)`` pair per layer, each (batch, kv_heads, tokens,
head_dim): transformers' legacy cache format, so a cache passes through a trace like any nested
input and a traced step returns the grown one. ``update`` writes a step's new keys and values
with the ``cache_append`` op (priced as the new rows only) and returns every key and value the
layer attends to. A layer with a sliding window keeps only its last ``window - 1`` tokens, as
transformers' ``DynamicSlidingWindowLayer`` does; ``get_seq_length`` still counts every token
seen, which is where the next token's position comes from.

    >>> import flopcount.runtime as rt
    >>> cache = DynamicCache()
    >>> keys, values = cache.update(rt.zeros(1, 2, 5, 4), rt.zeros(1, 2, 5, 4), 0)
    >>> cache.get_seq_length(), keys.shape
    (5, (1, 2, 5, 4))

A decoder given plain pairs (a list or tuple) wraps them in a new cache, leaving them as they
were; given a DynamicCache, it grows that one in place, as transformers does.
"""

from __future__ import annotations

from typing import NamedTuple

from .. import runtime as rt
from ..runtime.nn import functional as F


class CacheLayout(NamedTuple):
    """What one layer caches per sequence and position: ``keys`` and ``values`` as (heads, dim)
    (a latent-attention layer caches a latent and a shared rotary key: (1, rank), (1, rope_dim)),
    and its sliding ``window`` (None: every position is kept)."""

    keys: tuple
    values: tuple
    window: int | None = None
    latent: bool = False     # the keys are a compressed latent the attention expands

    @classmethod
    def heads(cls, heads: int, dim: int, window: int | None = None) -> "CacheLayout":
        """Keys and values of ``heads`` heads of ``dim`` each (multi-head, grouped or multi-query)."""
        return cls((heads, dim), (heads, dim), window)


class DynamicCache(list):
    """Per layer a ``(keys, values)`` pair; ``sliding_windows[i]`` is layer i's window (None: keep
    everything). ``seen_tokens`` gives each layer's count of tokens seen when it differs from what
    it stores (a sliding layer past its window); by default a pair holds every token seen."""

    def __init__(self, pairs=(), sliding_windows=None, seen_tokens=None):
        super().__init__(tuple(p) for p in pairs)
        for i, pair in enumerate(self):
            if len(pair) != 2:
                raise ValueError(f"DynamicCache: layer {i} must be a (keys, values) pair, got {len(pair)} items")
        self.sliding_windows = list(sliding_windows or [])
        self._seen = list(seen_tokens) if seen_tokens is not None else [k.shape[-2] for k, _ in self]

    @classmethod
    def empty(cls, layout, batch: int, context: int, dtype=rt.float32, device="meta") -> "DynamicCache":
        """A cache that has seen ``context`` tokens, each layer holding what it would keep (all of
        them, or the last window - 1), with uninitialized values: on the meta device, shapes only.
        ``layout`` is a decoder's ``kv_cache_layout()``: a CacheLayout per layer."""
        pairs, windows = [], []
        for keys, values, window, _ in layout:
            stored = context if window is None else min(context, window - 1)
            pairs.append(tuple(rt.empty(batch, heads, stored, dim, dtype=dtype, device=device)
                               for heads, dim in (keys, values)))
            windows.append(window)
        return cls(pairs, windows, seen_tokens=[context] * len(pairs))

    @classmethod
    def from_legacy_cache(cls, pairs, sliding_windows=None) -> "DynamicCache":
        """A cache over ``pairs`` (one (keys, values) per layer), as transformers' method of that name."""
        return cls(pairs, sliding_windows)

    def to_legacy_cache(self) -> tuple:
        """The pairs as a tuple of tuples."""
        return tuple(self)

    def window(self, layer_idx: int) -> int | None:
        return self.sliding_windows[layer_idx] if layer_idx < len(self.sliding_windows) else None

    def get_seq_length(self, layer_idx: int = 0) -> int:
        """Tokens layer ``layer_idx`` has seen (0 before its first update)."""
        return self._seen[layer_idx] if layer_idx < len(self) else 0

    def get_mask_sizes(self, queries: int, layer_idx: int) -> tuple[int, int]:
        """(how many keys the layer's next attention reads, the position of the first) for a
        step of ``queries`` new tokens: what is stored plus the new ones."""
        if layer_idx >= len(self):
            return queries, 0
        stored = self[layer_idx][0].shape[-2]
        return stored + queries, self._seen[layer_idx] - stored

    def update(self, keys, values, layer_idx: int) -> tuple:
        """Write the step's ``keys`` and ``values`` (B, kv_heads, n, D) into layer ``layer_idx`` and
        return the layer's keys and values for this step's attention (stored ones, then new)."""
        if layer_idx > len(self):
            raise ValueError(f"DynamicCache: layer {layer_idx} updated before layer {len(self)}")
        if layer_idx == len(self):   # keys and values may differ in width (a latent and a rotary key)
            self.append(tuple(rt.zeros(*t.shape[:-2], 0, t.shape[-1], dtype=t.dtype, device=t.device)
                              for t in (keys, values)))
            self._seen.append(0)
        cached_keys, cached_values = self[layer_idx]
        all_keys, all_values = F.cache_append(cached_keys, keys), F.cache_append(cached_values, values)
        self._seen[layer_idx] += keys.shape[-2]
        window = self.window(layer_idx)
        kept_keys, kept_values = all_keys, all_values
        if window is not None and all_keys.shape[-2] > window - 1:
            start = all_keys.shape[-2] - (window - 1)
            kept_keys, kept_values = all_keys[..., start:, :], all_values[..., start:, :]
        self[layer_idx] = (kept_keys, kept_values)
        return all_keys, all_values


def as_cache(past_key_values, sliding_windows) -> DynamicCache:
    """The cache a decoder works on: ``past_key_values`` itself when it is a DynamicCache, else
    a new one over its (keys, values) pairs (none when it is None)."""
    if isinstance(past_key_values, DynamicCache):
        return past_key_values
    return DynamicCache(past_key_values or (), sliding_windows)


class CausalLMOutputWithPast(dict):
    """What a decoder returns when it uses a cache: ``logits`` and ``past_key_values``, by key or
    attribute (transformers' output classes are dicts too). A graph of a decoder step returns a
    plain dict with the same keys."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None
