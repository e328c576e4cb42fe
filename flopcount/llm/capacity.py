"""What fits on a device: the longest context and the largest batch a decoder can serve.

Memory is the weights, in the weight format asked for (``--weights int4``: every linear and
stacked-expert weight at its format's bits, scales included; embeddings, ``lm_head``, norms and
tied weights at the model's dtype, as AWQ and GPTQ checkpoints keep them), plus the cache of
every sequence (``cache.LayerCache``: positions up to a sliding window, fixed-size states) at the
cache's dtype. A decode step's activations are small beside these and are not included, nor is a
serving engine's own reserve: the answer is the bound the weights and the cache set.

    >>> from flopcount.llm.decoders import load
    >>> fit = fit_on(load("llama2_7b", "bfloat16"), "h100-sxm", weights="int4", batch=1, context=8192)
    >>> fit.longest_context, fit.largest_batch
    (145217, 17)
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import hardware as hw
from .. import runtime as rt
from ..report.units import bytes_to_string
from ..runtime.quantization import weight_format
from .cache import bytes_per_token, cache_bytes, state_bytes


@dataclass
class Fit:
    """The bound: device memory, weight and cache bytes, and the longest context (at ``batch``)
    and largest batch (at ``context``) whose weights and cache fit."""

    device: str
    memory_bytes: int
    weight_format: str
    weight_bytes: int
    kv_dtype: str
    kv_bytes_per_token: float
    state_bytes: float                  # per sequence, whatever the context
    batch: int
    context: int
    longest_context: int                # at ``batch``; 0: not even an empty cache fits
    context_limit: int | None           # the model's max_position_embeddings, when known
    largest_batch: int                  # at ``context``

    def to_dict(self) -> dict:
        return dict(vars(self))


def quantized_weight_bytes(decoder, fmt) -> int:
    """The decoder's weights with its linear and stacked-expert weights in format ``fmt``."""
    fmt = weight_format(fmt)
    total = 0
    for numel, nbytes, matrix in decoder.weights():
        if matrix is None:
            total += nbytes
            continue
        out_features, in_features = matrix
        total += int(numel * fmt.bits_per_weight(in_features, out_features) + 7) // 8
    return total


def fit_on(decoder, hardware, *, weights=None, kv_dtype=None, batch: int = 1, context: int | None = None) -> Fit:
    """The longest context at ``batch`` and the largest batch at ``context`` (default: the model's
    longest, else 4096) for ``decoder`` on ``hardware`` (a profile or its name)."""
    profile = hw.get(hardware)
    cache_dtype = rt.get_dtype(kv_dtype) if kv_dtype is not None else decoder.dtype
    nbytes = cache_dtype.bits / 8
    weight_bytes = quantized_weight_bytes(decoder, weights) if weights is not None else decoder.weight_bytes
    limit = decoder.context_limit
    if context is None:
        context = limit or 4096
    free = profile.memory_bytes - weight_bytes
    layers = decoder.layers

    def fits(c: int, b: int) -> bool:
        return cache_bytes(layers, c, b, nbytes) <= free

    longest = 0
    if fits(0, batch):
        low, high = 0, 1
        while fits(high, batch) and high < (1 << 40):   # every layer slides or is a state: no bound
            low, high = high, high * 2
        while high - low > 1:
            mid = (low + high) // 2
            low, high = (mid, high) if fits(mid, batch) else (low, mid)
        longest = low
    per_sequence = cache_bytes(layers, context, 1, nbytes)
    largest = int(free // per_sequence) if free > 0 and per_sequence else 0
    return Fit(device=profile.name, memory_bytes=int(profile.memory_bytes),
               weight_format=str(weights) if weights is not None else getattr(decoder, "weight_format",
                                                                                 decoder.dtype.name),
               weight_bytes=weight_bytes, kv_dtype=cache_dtype.name,
               kv_bytes_per_token=bytes_per_token(layers, nbytes), state_bytes=state_bytes(layers),
               batch=batch, context=context, longest_context=longest, context_limit=limit, largest_batch=largest)


def render_fit(fit: Fit, label: str) -> str:
    """The fit for people: three lines."""
    unbounded = fit.longest_context >= (1 << 39)
    longest = "no limit from memory (every layer slides or keeps a fixed state)" if unbounded \
        else f"{fit.longest_context:,} tokens"
    limit = f" (the model's own limit is {fit.context_limit:,})" if fit.context_limit else ""
    state = f", {bytes_to_string(fit.state_bytes)} of fixed state per sequence" if fit.state_bytes else ""
    return "\n".join([
        f"{label} on {fit.device} ({bytes_to_string(fit.memory_bytes)}): weights {fit.weight_format} "
        f"{bytes_to_string(fit.weight_bytes)}, KV cache {fit.kv_dtype} "
        f"{bytes_to_string(fit.kv_bytes_per_token)} per token{state}",
        f"longest context at batch {fit.batch}: {longest}{limit}",
        f"largest batch at context {fit.context:,}: {fit.largest_batch:,} sequences",
        "(weights and KV cache only: a decode step's activations and a serving engine's reserve come on top)"])


__all__ = ["Fit", "fit_on", "render_fit", "quantized_weight_bytes"]
