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

from .. import loading
from .. import runtime as rt
from ..runtime.errors import ShapeError
from ..runtime.nn.modules.module import Module
from .cache import bytes_per_token, cache_bytes, from_layout
from .generation import decode_steps
from .moe import moe_summary
from .phases import Decode, Generate, Prefill, kv_cache_layout
from .report import LLMReport
from .step import count_step, trace_step


def decoder(model, dtype=None) -> tuple:
    """(the decoder Module, its label): a zoo name or factory built on meta, in ``dtype``; a
    Module as given (``dtype``, when set, must be its parameters')."""
    target = loading.load(model, "meta", zoo_device="meta")
    net = target.model
    if not isinstance(net, Module):
        raise ShapeError(f"LLM phases trace a decoder Module; {target.name} is a {type(net).__name__}")
    kv_cache_layout(net)  # refuses a model without a KV cache, naming it
    current = next((p.dtype for p in net.parameters() if p.dtype.is_floating_point), rt.float32)
    if dtype is not None and rt.get_dtype(dtype) is not current:
        if target.kind == loading.OBJECT:
            raise ShapeError(f"the model's parameters are {current.name}, not {rt.get_dtype(dtype).name}; "
                             f"convert it first (model.to(dtype)) or pass a zoo name")
        net.to(rt.get_dtype(dtype))
    return net, target.name


def kv_bytes_per_token(model, dtype) -> int:
    """Bytes one position of one sequence takes in the KV cache, keys and values, every layer."""
    return int(bytes_per_token(from_layout(kv_cache_layout(model)), rt.get_dtype(dtype).bits / 8))


def kv_cache_bytes(model, context: int, batch: int, dtype) -> int:
    """The KV cache after ``context`` tokens of ``batch`` sequences: each layer keeps every
    position, or the last window - 1 with a sliding window."""
    return int(cache_bytes(from_layout(kv_cache_layout(model)), context, batch, rt.get_dtype(dtype).bits / 8))


def profile(model, phase, *, batch: int = 1, dtype=None, hardware=None,
            attn_implementation: str | None = None) -> LLMReport:
    """The cost of ``phase`` (``Prefill``, ``Decode`` or ``Generate``) on ``model`` at ``batch``
    sequences: per op and per layer MACs, FLOPs, weight, KV cache and activation bytes, the
    memory it needs, and with ``hardware`` (a ``flopcount.hardware`` profile or its name, such
    as ``"h100-sxm"``) roofline times: time to first token, time per output token, tokens per second, whether it fits.

    >>> from flopcount import llm
    >>> r = llm.profile("llama2_7b", llm.Decode(context=2048), dtype="float16")
    >>> r.kv_bytes_per_token, r.decode.last.kv_cache_bytes == 2049 * r.kv_bytes_per_token
    (524288, True)
    """
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ShapeError(f"batch must be an integer >= 1, got {batch!r}")
    if not isinstance(phase, (Prefill, Decode, Generate)):
        raise ShapeError(f"phase must be llm.Prefill, llm.Decode or llm.Generate, got {phase!r}")
    net, label = decoder(model, dtype)
    chosen = net.config.attn_implementation
    if attn_implementation is not None:
        net.set_attn_implementation(attn_implementation)
    try:
        return _profile(net, label, phase, batch, hardware)
    finally:
        net.set_attn_implementation(chosen)  # a model given as an object is left as it was


def _profile(net, label: str, phase, batch: int, hardware) -> LLMReport:
    dtype = next((p.dtype for p in net.parameters() if p.dtype.is_floating_point), rt.float32)
    report = LLMReport(model=label, phase=phase, batch=batch, dtype=dtype.name,
                       attn_implementation=net.config.attn_implementation,
                       params=sum(p.numel() for p in net.parameters()),
                       weight_bytes=sum(p.dtype.nbytes(p.numel()) for p in net.parameters()),
                       kv_bytes_per_token=kv_bytes_per_token(net, dtype), moe=moe_summary(net))
    prefill = phase if isinstance(phase, Prefill) else phase.prefill if isinstance(phase, Generate) else None
    if prefill is not None:
        report.prefill = count_step(net, trace_step(net, prefill, batch, dtype), prefill, batch, dtype)
    if isinstance(phase, Decode):
        report.decode = decode_steps(net, range(phase.context, phase.context + 1), batch, dtype)
    elif isinstance(phase, Generate):
        report.decode = decode_steps(net, phase.contexts, batch, dtype)
    if report.moe is not None:
        report.notes.append("MoE routing: balanced (a meta trace has no router values: the tokens' k choices "
                            "spread evenly over the experts)")
    if hardware is not None:
        from .timing import phase_times

        report.roofline = phase_times(report, hardware)
    return report
