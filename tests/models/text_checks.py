"""Checks shared by the text-model zoo tests (bert, gpt2, llama): state-dict shapes, and runs of
our model next to Hugging Face transformers' on the same tokens and weights."""

from __future__ import annotations

import numpy as np
import pytest

import flopcount.runtime as rt
from flopcount import models


def state_shapes(model) -> dict:
    """Every state-dict entry's shape, by name (ours or a torch module)."""
    return {k: tuple(v.shape) for k, v in model.state_dict().items()}


def eager_and_meta_outputs(model, name: str) -> tuple:
    """``model``'s output on zoo ``name``'s example input (no gradients), and the output of
    ``name`` built on the meta device, on the meta example input."""
    with rt.no_grad():
        eager = model(models.example_input(name))
    with rt.meta():
        meta_model = models.get(name)
    return eager, meta_model(models.example_input(name, device="meta"))


def transformers_on_meta(build):
    """transformers' model ``build(transformers)`` on torch's meta device (shapes only); the test
    skips where torch or transformers is not installed."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    with torch.device("meta"):
        return build(transformers)


def transformers_reference(ours, build):
    """transformers' model ``build(transformers)``, seeded and in eval mode, with its weights
    loaded into ``ours``; the test skips where torch or transformers is not installed."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    ref = build(transformers).eval()
    ours.load_state_dict({k: v.numpy() for k, v in ref.state_dict().items()}, strict=True)
    return ref


def outputs_with_transformers(ours, reference, ids: np.ndarray, inputs: dict, implementation: str) -> tuple:
    """(ours, theirs): both models' outputs, without gradients, on the same token ``ids`` and
    other (B, L) integer ``inputs`` (numpy arrays by argument name), each model running its
    attention as ``implementation``; ours goes back to "eager" afterwards."""
    import torch

    ours.set_attn_implementation(implementation)
    reference.set_attn_implementation(implementation)
    try:
        with rt.no_grad():
            mine = ours(rt.tensor(ids), **{k: rt.tensor(v) for k, v in inputs.items()})
        with torch.no_grad():
            theirs = reference(torch.from_numpy(ids), **{k: torch.from_numpy(v) for k, v in inputs.items()})
    finally:
        ours.set_attn_implementation("eager")
    return mine, theirs


def logits_before_and_after(model, ids: np.ndarray, changed: np.ndarray, implementation: str) -> tuple:
    """The logits (numpy) of ``ids`` and of ``changed`` with the attention run as
    ``implementation``; the model goes back to "eager" afterwards."""
    model.set_attn_implementation(implementation)
    try:
        with rt.no_grad():
            return model(rt.tensor(ids)).numpy(), model(rt.tensor(changed)).numpy()
    finally:
        model.set_attn_implementation("eager")


def assert_gradients_match_transformers(ours, reference, ids: np.ndarray, vocab_size: int) -> None:
    """Backpropagate the same random weighting of the logits through both causal LMs: every
    parameter's gradient equals transformers' within 1e-4 of its scale."""
    import torch

    weights = np.random.default_rng(0).standard_normal((1, ids.shape[1], vocab_size)).astype(np.float32)
    ours.zero_grad()
    (ours(rt.tensor(ids)) * rt.tensor(weights)).sum().backward()
    reference.zero_grad()
    (reference(torch.from_numpy(ids)).logits * torch.from_numpy(weights)).sum().backward()
    theirs = dict(reference.named_parameters())
    for name, param in ours.named_parameters():
        expected = theirs[name].grad.numpy()  # a tied weight's gradient includes every use's share
        assert np.abs(param.grad.numpy() - expected).max() <= 1e-4 * max(1.0, np.abs(expected).max()), name
    ours.zero_grad()
