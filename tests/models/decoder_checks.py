"""The decoder families (llama, mistral, qwen2, gemma, phi3, mixtral) next to their transformers
classes: one table of zoo names and class names, and runs of both with and without a KV cache."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import flopcount.runtime as rt
from flopcount import models

# family -> (small zoo model, large presets, transformers' CausalLM class, its config class)
FAMILIES = {
    "llama": ("llama", ("llama2_7b", "llama3_8b"), "LlamaForCausalLM", "LlamaConfig"),
    "mistral": ("mistral", ("mistral_7b",), "MistralForCausalLM", "MistralConfig"),
    "qwen2": ("qwen2", ("qwen2_7b",), "Qwen2ForCausalLM", "Qwen2Config"),
    "gemma": ("gemma", ("gemma_7b",), "GemmaForCausalLM", "GemmaConfig"),
    "phi3": ("phi3", ("phi3_mini",), "Phi3ForCausalLM", "Phi3Config"),
    "mixtral": ("mixtral", ("mixtral_8x7b",), "MixtralForCausalLM", "MixtralConfig"),
}


def hf_model(family: str, config: dict, **overrides):
    """transformers' model of ``family`` with our preset ``config`` (eager attention)."""
    transformers = pytest.importorskip("transformers")
    _, _, model_name, config_name = FAMILIES[family]
    hf_config = getattr(transformers, config_name)(attn_implementation="eager", **{**config, **overrides})
    return getattr(transformers, model_name)(hf_config)


def ours_and_reference(family: str, **overrides):
    """Our small model of ``family`` with the weights of transformers' (seeded, eval mode)."""
    torch = pytest.importorskip("torch")
    name = FAMILIES[family][0]
    torch.manual_seed(0)
    ref = hf_model(family, models.info(name).config, **overrides).eval()
    with torch.no_grad():  # norms start at one (Gemma's at zero) and biases at zero: make them count
        for p in ref.parameters():
            if p.ndim == 1:
                p.add_(0.1 * torch.randn(p.shape))
    ours = models.get(name, **overrides).eval()
    ours.load_state_dict({k: v.numpy() for k, v in ref.state_dict().items()}, strict=True)
    return ours, ref


def token_ids(name: str, length: int, batch: int = 1, seed: int = 0) -> np.ndarray:
    vocab = models.info(name).config["vocab_size"]
    return np.random.default_rng(seed).integers(0, vocab, size=(batch, length)).astype(np.int64)


def hf_forward(ref, ids: np.ndarray, cache=None, **kwargs):
    """transformers' forward on ``ids`` with its cache (the argument is ``cache`` in transformers
    5.x, ``past_key_values`` before); returns (logits as numpy, the cache)."""
    import torch

    name = "cache" if "cache" in inspect.signature(ref.forward).parameters else "past_key_values"
    with torch.no_grad():
        out = ref(torch.from_numpy(ids), use_cache=True, **{name: cache},
                  **{k: torch.from_numpy(v) for k, v in kwargs.items()})
    return out.logits.numpy(), getattr(out, name)


def ours_forward(model, ids: np.ndarray, cache=None, **kwargs):
    """Our forward with a cache; returns (logits as numpy, the cache)."""
    with rt.no_grad():
        out = model(rt.tensor(ids), past_key_values=cache, use_cache=True,
                    **{k: rt.tensor(v) for k, v in kwargs.items()})
    return out.logits.numpy(), out.past_key_values


def generate_in_steps(forward, model, ids: np.ndarray, prompt: int) -> np.ndarray:
    """The logits of ``ids``: a prefill over the first ``prompt`` tokens, then one decode step per
    remaining token (teacher forcing), concatenated."""
    logits, cache = forward(model, ids[:, :prompt])
    out = [logits]
    for i in range(prompt, ids.shape[1]):
        logits, cache = forward(model, ids[:, i:i + 1], cache)
        out.append(logits)
    return np.concatenate(out, axis=1)
