"""What a decoder keeps between steps, layer by layer, as a serving engine lays it out.

Each layer's cache is one ``LayerCache``:

* ``full``: keys and values of every position (multi-head, grouped-query or multi-query
  attention: 2 x kv_heads x head_dim values per position);
* ``sliding``: the same, but only the last ``window - 1`` positions stay (Mistral, Gemma-2/3's
  local layers, gpt-oss), as transformers' ``DynamicSlidingWindowLayer`` and vLLM keep them;
* ``latent``: multi-head latent attention (DeepSeek-V2/V3) caches the compressed latent and
  the shared rotary key, ``kv_lora_rank + qk_rope_head_dim`` values per position, not the
  per-head keys and values the latent expands to;
* ``state``: a fixed-size recurrent state (Mamba's convolution and SSM states, linear
  attention's): the same at every context;
* a hybrid layer (Falcon-H1: attention and Mamba side by side) has positions and a state.

Bytes are values times the cache's dtype (``--kv-dtype``, the model's by default).

    >>> layers = [LayerCache("full", per_token=2 * 8 * 128)] * 2 + [LayerCache("sliding", 2 * 8 * 128, 4095)]
    >>> bytes_per_token(layers, 2), cache_bytes(layers, context=8192, batch=1, nbytes=2)
    (12288, 83881984)
"""

from __future__ import annotations

from dataclasses import dataclass

KINDS = ("full", "sliding", "latent", "state", "hybrid", "none")


@dataclass(frozen=True)
class LayerCache:
    """One layer's cache for one sequence: ``per_token`` values per cached position (stored at
    the cache's dtype), ``max_positions`` the most positions kept (None: all), and
    ``state_bytes`` of a state that does not grow (stored at its own dtypes: Mamba keeps its SSM
    state in float32 beside a bf16 model, whatever the KV cache's dtype)."""

    kind: str
    per_token: int = 0
    max_positions: int | None = None
    state_bytes: int = 0

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"LayerCache: kind must be one of {KINDS}, got {self.kind!r}")

    def positions(self, context: int) -> int:
        """Positions kept after ``context`` tokens."""
        return context if self.max_positions is None else min(context, self.max_positions)

    def bytes(self, context: int, nbytes: float) -> float:
        """Bytes kept for one sequence after ``context`` tokens, positions at ``nbytes`` a value."""
        return self.per_token * self.positions(context) * nbytes + self.state_bytes

    def to_dict(self, context: int, nbytes: float) -> dict:
        out = {"kind": self.kind, "bytes_per_token": self.per_token * nbytes,
               "bytes_at_context": self.bytes(context, nbytes)}
        if self.max_positions is not None:
            out["max_positions"] = self.max_positions
        if self.state_bytes:
            out["state_bytes"] = self.state_bytes
        return out


def bytes_per_token(layers: list, nbytes: float) -> float:
    """Bytes one more position adds to one sequence's cache while no window is full."""
    return sum(layer.per_token for layer in layers) * nbytes


def cache_bytes(layers: list, context: int, batch: int, nbytes: float) -> float:
    """The cache of ``batch`` sequences after ``context`` tokens each."""
    return batch * sum(layer.bytes(context, nbytes) for layer in layers)


def state_bytes(layers: list) -> float:
    """The fixed-size part of one sequence's cache (recurrent states)."""
    return sum(layer.state_bytes for layer in layers)


def breakpoints(layers: list, contexts: range) -> list:
    """The contexts inside ``contexts`` at which a sliding layer's cache is full: a decode
    step's cost is affine in the context on each side of them."""
    points = sorted({layer.max_positions for layer in layers if layer.max_positions is not None})
    return [p for p in points if contexts.start < p < contexts.stop]


def from_layout(layout: list) -> list:
    """LayerCaches of a native decoder's ``kv_cache_layout()`` (``models._cache.CacheLayout``)."""
    out = []
    for keys, values, window, latent in layout:
        per_token = keys[0] * keys[1] + values[0] * values[1]
        if window is not None:
            out.append(LayerCache("sliding", per_token, window - 1))
        else:
            out.append(LayerCache("latent" if latent else "full", per_token))
    return out


__all__ = ["LayerCache", "KINDS", "bytes_per_token", "cache_bytes", "state_bytes", "breakpoints", "from_layout"]
