"""How long one step of a continuous-batching server takes, fit on traced steps of the model.

A step processes ``tokens`` new tokens (prefill chunks, and one per decoding sequence). Its
attention costs two ways: a decoding sequence at context c reads c + 1 cached positions
(``read``: memory-bound), and a prefill chunk of n tokens after o cached ones computes n·(o + n)
scores (``square``, as the traced attention computes them: compute-bound). For each token count
T of a grid, two decode steps (batch T at a short and a long context) and a prefill of T tokens
are traced and priced on the hardware's roofline (every op's max(FLOPs / peak, bytes /
bandwidth), summed), which fixes ``α(T) + β_read(T)·read + β_square(T)·square`` exactly on
those three points. Between grid points the coefficients are interpolated in log T, beyond the
last one extrapolated linearly in T. With tensor parallelism on ``tp`` GPUs each GPU does 1/tp
of the work, and every layer adds two ring all-reduces of the step's activations over the node's
links.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

GRID = tuple(2 ** i for i in range(15))   # 1 ... 16384 tokens per step
SHORT_CONTEXT = 16


@dataclass(frozen=True)
class StepTime:
    """Seconds per step as a function of (tokens, read, square), per the traced points."""

    tokens: tuple            # the grid of T
    base: tuple              # α(T), seconds
    per_read: tuple          # β_read(T), seconds per cached position a decoding token reads
    per_square: tuple        # β_square(T), seconds per prefill attention score
    comm_per_token: float    # tensor-parallel all-reduce seconds per token in the step

    def __call__(self, tokens: int, read: int = 0, square: int = 0) -> float:
        if tokens <= 0:
            return 0.0
        alpha, beta_read, beta_square = self._at(tokens)
        return alpha + beta_read * read + beta_square * square + self.comm_per_token * tokens

    def _at(self, tokens: int) -> tuple:
        grid, curves = self.tokens, (self.base, self.per_read, self.per_square)
        if len(grid) == 1:
            return tuple(c[0] for c in curves)
        if tokens >= grid[-1]:
            # compute-bound at the top: the per-token growth of the last interval, carried on
            return tuple(c[-1] + (c[-1] - c[-2]) / (grid[-1] - grid[-2]) * (tokens - grid[-1]) for c in curves)
        xs = [math.log(t) for t in grid]
        return tuple(float(np.interp(math.log(tokens), xs, c)) for c in curves)


def prefill_square(chunk: int, offset: int) -> int:
    """Attention scores a prefill chunk of ``chunk`` tokens after ``offset`` cached ones computes."""
    return chunk * (offset + chunk)


def fit(decoder, hardware, *, tp: int = 1, max_tokens: int = 8192, progress=None) -> StepTime:
    """Trace and price the steps of ``decoder`` (from ``flopcount.llm.decoder``) on ``hardware``
    (a profile) for every grid size up to ``max_tokens``, and fit :class:`StepTime`."""
    from ..llm.api import profile_decoder
    from ..llm.phases import Decode, Prefill

    def seconds(phase, batch: int, key: str) -> float:
        return float(profile_decoder(decoder, phase, batch=batch, hardware=hardware).to_dict()["roofline"][key])

    limit = decoder.context_limit or 1 << 20
    grid = [t for t in GRID if t < max_tokens] + [max_tokens]
    long_context = max(SHORT_CONTEXT + 1, min(limit - 1, 2048))
    base, per_read, per_square = [], [], []
    for i, t in enumerate(grid):
        if progress is not None:
            progress(i, len(grid))
        short = seconds(Decode(SHORT_CONTEXT), t, "time_per_output_token_s")
        long = seconds(Decode(long_context), t, "time_per_output_token_s")
        beta_read = max(0.0, (long - short) / (t * (long_context - SHORT_CONTEXT)))
        alpha = max(0.0, short - beta_read * t * (SHORT_CONTEXT + 1))
        if t <= limit:
            beta_square = max(0.0, (seconds(Prefill(t), 1, "time_to_first_token_s") - alpha) / prefill_square(t, 0))
        else:  # longer than the model's context: the last traced prefill's cost per score
            beta_square = per_square[-1] * tp
        base.append(alpha / tp)
        per_read.append(beta_read / tp)
        per_square.append(beta_square / tp)
    return StepTime(tuple(grid), tuple(base), tuple(per_read), tuple(per_square), _comm_per_token(decoder, hardware, tp))


def _comm_per_token(decoder, hardware, tp: int) -> float:
    """Two ring all-reduces per layer of one token's hidden state, over the node's links."""
    if tp == 1:
        return 0.0
    config = getattr(decoder.net, "config", None)
    hidden = getattr(config, "hidden_size", None) or getattr(config, "n_embd", None)   # GPT-2's name
    if hidden is None:
        return 0.0
    bandwidth = hardware.intra_node_bandwidth
    nbytes = hidden * decoder.dtype.bits / 8
    return 2 * len(decoder.layers) * 2 * (tp - 1) / tp * nbytes / bandwidth
