"""``llm.profile``: what a decoder costs in one phase of inference.

    from flopcount import llm
    report = llm.profile("llama2_7b", llm.Generate(prompt=2048, new_tokens=256), dtype="float16")
    print(report.table())

The model is built on the meta device (a zoo name, a ``file.py:factory``) or taken as given (a
Module: its parameters' dtype is the one counted), and traced on the phase's inputs: a prefill
over the prompt, decode steps over a meta KV cache of the context's length. Nothing is
allocated, so a 70B model counts on a laptop.
"""

from __future__ import annotations

from .. import runtime as rt
from ..runtime.routing import check_policy, note
from ..runtime.errors import ShapeError
from . import decoders
from .cache import bytes_per_token, cache_bytes
from .capacity import fit_on
from .generation import decode_steps
from .phases import Decode, Generate, Prefill, _positive
from .report import LLMReport
from .roofline_times import phase_times
from .step import count_step

def decoder(model, dtype=None, moe_routing: str = "balanced"):
    """The decoder ``model`` names, ready to trace (``decoders.load``): a zoo name, a
    ``file.py:factory``, a Hugging Face folder, a flopcount Module or a transformers module."""
    return decoders.load(model, dtype, check_policy(moe_routing))


def kv_bytes_per_token(model, dtype) -> int:
    """Bytes one position of one sequence takes in the cache (every layer's keys and values, or
    latent), at ``dtype``; fixed-size states do not grow and are not in it."""
    return int(bytes_per_token(decoders.load(model).layers, rt.get_dtype(dtype).bits / 8))


def kv_cache_bytes(model, context: int, batch: int, dtype) -> int:
    """The cache after ``context`` tokens of ``batch`` sequences at ``dtype``: each layer keeps
    every position, the last window - 1 with a sliding window, or its fixed-size state."""
    return int(cache_bytes(decoders.load(model).layers, context, batch, rt.get_dtype(dtype).bits / 8))


def profile(model, phase, *, batch: int = 1, dtype=None, hardware=None, attn_implementation: str | None = None,
            moe_routing: str = "balanced", kv_dtype=None) -> LLMReport:
    """The cost of ``phase`` (``Prefill``, ``Decode`` or ``Generate``) on ``model`` at ``batch``
    sequences: per op and per layer MACs, FLOPs, weight, KV cache and activation bytes, the
    memory it needs, and with ``hardware`` (a ``flopcount.hardware`` profile or its name, such
    as ``"h100-sxm"``) roofline times: time to first token, time per output token, tokens per
    second, whether it fits. ``model`` is anything ``decoder`` takes; ``moe_routing`` is the
    routing policy of MoE layers (``balanced``, ``worst``, or ``real`` on data); ``kv_dtype``
    stores the cache in another dtype than the model's (``"float8_e4m3fn"``).

    >>> from flopcount import llm
    >>> r = llm.profile("llama2_7b", llm.Decode(context=2048), dtype="float16")
    >>> r.kv_bytes_per_token, r.decode.last.kv_cache_bytes == 2049 * r.kv_bytes_per_token
    (524288, True)
    """
    _positive("batch", batch)
    if not isinstance(phase, (Prefill, Decode, Generate)):
        raise ShapeError(f"phase must be llm.Prefill, llm.Decode or llm.Generate, got {phase!r}")
    check_policy(moe_routing)
    kv = rt.get_dtype(kv_dtype) if kv_dtype is not None else None
    net = decoder(model, dtype, moe_routing)
    if moe_routing != "balanced" and net.moe is None:
        raise ShapeError(f"--moe-routing {moe_routing} applies to a mixture of experts; {net.label} has no expert "
                         f"layers")
    with net.attention(attn_implementation):
        return _profile(net, phase, batch, hardware, moe_routing, kv)


def profile_decoder(net, phase, *, batch: int = 1, hardware=None, moe_routing: str = "balanced",
                    kv_dtype=None) -> LLMReport:
    """:func:`profile` of a decoder already loaded by :func:`decoder`: a caller pricing many
    steps of one model (a serving simulation) loads and checks it once.

    >>> from flopcount import llm
    >>> net = llm.decoder("llama")
    >>> llm.profile_decoder(net, llm.Decode(context=16)).decode.last.total.macs > 0
    True
    """
    return _profile(net, phase, batch, hardware, moe_routing, rt.get_dtype(kv_dtype) if kv_dtype else None)


def _profile(net, phase, batch: int, hardware, routing: str, kv) -> LLMReport:
    kv_bits = kv.bits if kv is not None else None
    cache_dtype = kv or net.dtype
    report = LLMReport(model=net.label, phase=phase, batch=batch, dtype=net.dtype.name,
                       attn_implementation=net.attn_implementation, params=net.params,
                       weight_bytes=net.weight_bytes,
                       kv_bytes_per_token=int(bytes_per_token(net.layers, cache_dtype.bits / 8)),
                       moe=net.moe, layers=net.layers, kv_dtype=cache_dtype.name, routing=routing)
    report.notes.extend(getattr(net, "notes", []))
    prefill = phase if isinstance(phase, Prefill) else phase.prefill if isinstance(phase, Generate) else None
    if prefill is not None:
        traced = net.trace(prefill, batch)
        report.prefill = count_step(net, traced, prefill, batch, kv_bits)
        report.notes.extend(n for n in traced.notes if n not in report.notes)
    contexts = range(phase.context, phase.context + 1) if isinstance(phase, Decode) else \
        phase.contexts if isinstance(phase, Generate) else range(0)
    if len(contexts):
        report.decode = decode_steps(net, contexts, batch, kv_bits)
    report.routing_choices = report.steps[-1].routing
    if report.moe is not None:
        report.notes.append(note(routing))
    if hardware is not None:
        report.roofline = phase_times(report, hardware)
    return report


def fit(model, hardware, *, dtype=None, weights=None, kv_dtype=None, batch: int = 1, context: int | None = None):
    """The longest context at ``batch`` and the largest batch at ``context`` whose weights (in
    weight format ``weights``, e.g. ``"int4"``) and KV cache (at ``kv_dtype``) fit on
    ``hardware`` (``capacity.py``).

    >>> from flopcount import llm
    >>> f = llm.fit("llama2_7b", "h100-sxm", dtype="bfloat16", weights="int4")
    >>> f.longest_context > 100_000, f.largest_batch
    (True, 35)
    """
    _positive("batch", batch)
    if context is not None:
        _positive("context", context, minimum=0)
    return fit_on(decoder(model, dtype), hardware, weights=weights, kv_dtype=kv_dtype, batch=batch, context=context)
