"""LLM inference from a real trace: prefill, decode and whole generations of the zoo's decoders.

    from flopcount import llm
    report = llm.profile("llama2_7b", llm.Generate(prompt=2048, new_tokens=256), dtype="float16")
    print(report.table())

Phases are inputs (``phases.py``): the decoder is traced on a prompt, or on one new token with a
meta KV cache of the context's length. Each op's MACs, FLOPs and bytes (weights, KV cache,
activations) come from the op's cost rule on the traced shapes (``step.py``, ``traffic.py``); a
generation's decode steps are summed exactly from a few traces (``generation.py``); a hardware
profile (``flopcount.hardware``) turns them into roofline times (``roofline_times.py``).
"""

from .api import decoder, fit, kv_bytes_per_token, kv_cache_bytes, profile, profile_decoder
from .cache import LayerCache
from .capacity import Fit
from .moe import MoESummary, expected_experts, moe_summary
from .phases import Decode, Generate, Prefill, parse_phase
from .report import LLMReport

__all__ = ["profile", "profile_decoder", "fit", "Prefill", "Decode", "Generate", "parse_phase", "LLMReport", "MoESummary", "Fit",
           "LayerCache", "expected_experts", "moe_summary", "decoder", "kv_bytes_per_token", "kv_cache_bytes"]
