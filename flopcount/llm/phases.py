"""The phases of LLM inference as inputs to one decoder forward.

* ``Prefill(tokens)``: the prompt, ``tokens`` per sequence, in one forward that writes the cache.
* ``Decode(context)``: one new token per sequence attending to ``context`` cached positions,
  given as a cache of that length (on the meta device, shapes only).
* ``Generate(prompt, new_tokens)``: ``new_tokens`` forward passes, as ``generate`` makes them:
  ``Prefill(prompt)``, whose logits give the first new token, then ``new_tokens - 1`` decode
  steps at contexts prompt, prompt + 1, ..., prompt + new_tokens - 2.

A phase is data: ``step_inputs`` gives the keyword inputs of the forward it stands for, so a
phase is traced and counted like any forward (DESIGN.md: "LLM phases are inputs").

    >>> Decode(context=2048)
    Decode(context=2048)
    >>> parse_phase(generate="2048:256")
    Generate(prompt=2048, new_tokens=256)
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import runtime as rt
from ..models._cache import DynamicCache
from ..runtime.errors import ShapeError


def _positive(what: str, value, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ShapeError(f"{what} must be an integer >= {minimum}, got {value!r}")
    return value


@dataclass(frozen=True)
class Prefill:
    """One forward over a prompt of ``tokens`` tokens per sequence."""

    tokens: int

    def __post_init__(self):
        _positive("prefill tokens", self.tokens)

    def step_inputs(self, model, batch: int, dtype, device="meta") -> dict:
        ids = rt.zeros(batch, self.tokens, dtype=rt.int64, device=device)
        return {"input_ids": ids, "use_cache": True}


@dataclass(frozen=True)
class Decode:
    """One new token per sequence, attending to ``context`` cached positions."""

    context: int

    def __post_init__(self):
        _positive("decode context", self.context, minimum=0)

    def step_inputs(self, model, batch: int, dtype, device="meta") -> dict:
        cache = DynamicCache.empty(kv_cache_layout(model), batch, self.context, dtype, device)
        return {"input_ids": rt.zeros(batch, 1, dtype=rt.int64, device=device),
                # the positions as data: a cache given as pairs cannot say how many tokens a
                # sliding layer has seen beyond what it keeps
                "position_ids": rt.full((batch, 1), self.context, dtype=rt.int64, device=device),
                "past_key_values": [tuple(pair) for pair in cache], "use_cache": True}


@dataclass(frozen=True)
class Generate:
    """``new_tokens`` forward passes, as transformers' ``generate(max_new_tokens=new_tokens)``
    and serving engines make them: ``Prefill(prompt)`` (which yields the first new token), then
    ``new_tokens - 1`` decode steps with the context growing by one each."""

    prompt: int
    new_tokens: int

    def __post_init__(self):
        _positive("generate prompt tokens", self.prompt)
        _positive("generate new tokens", self.new_tokens)

    @property
    def prefill(self) -> Prefill:
        return Prefill(self.prompt)

    @property
    def contexts(self) -> range:
        """The context of each decode step: the prompt and the new tokens before the step's."""
        return range(self.prompt, self.prompt + self.new_tokens - 1)


def kv_cache_layout(model) -> list:
    """The model's (kv_heads, head_dim, window) per layer; a ShapeError for a model without a KV cache."""
    layout = getattr(model, "kv_cache_layout", None)
    if layout is None:
        raise ShapeError(f"LLM phases need a causal language model that keeps a cache between steps (a zoo "
                         f"decoder, a Hugging Face folder of a ...ForCausalLM, or a transformers causal LM); "
                         f"got {type(model).__name__}")
    return layout()


def parse_phase(prefill: int | None = None, decode: bool = False, context: int | None = None,
                generate: str | None = None):
    """The phase the command-line options name: ``--prefill N``, ``--decode --context N`` or
    ``--generate PROMPT:NEW``; one of them, and a ShapeError naming what is wrong otherwise."""
    chosen = [name for name, given in (("--prefill", prefill is not None), ("--decode", decode),
                                       ("--generate", generate is not None)) if given]
    if len(chosen) > 1:
        raise ShapeError(f"choose one phase, got {' and '.join(chosen)}")
    if context is not None and not decode:
        raise ShapeError("--context goes with --decode (the context a decode step attends to) or --fit")
    if prefill is not None:
        return Prefill(prefill)
    if decode:
        if context is None:
            raise ShapeError("--decode needs --context N (the cached positions the new token attends to)")
        return Decode(context)
    if generate is not None:
        prompt, sep, new = str(generate).partition(":")
        if not sep or not prompt.strip().isdigit() or not new.strip().isdigit():
            raise ShapeError(f"--generate takes PROMPT:NEW_TOKENS such as 2048:256, got {generate!r}")
        return Generate(int(prompt), int(new))
    return None
