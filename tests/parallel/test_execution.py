"""A plan's rank graphs, run together in one process with their boxing applied, compute the
training step of one device: the same outputs and the same gradients."""

import numpy as np
import pytest

import flopcount.runtime as rt
from flopcount import models
from flopcount.parallel.execute import run_step_on_mesh
from flopcount.runtime.graph.training import trace_training

VOCAB, LENGTH, BATCH = 64, 8, 4


def _gpt2(**config):
    rt.manual_seed(0)
    model = models.get("gpt2", n_layer=2, n_embd=32, n_head=4, vocab_size=VOCAB, n_positions=16,
                       resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, **config)
    return model.to(rt.float64).train()


def _llama():
    rt.manual_seed(0)
    model = models.get("llama", hidden_size=32, intermediate_size=64, num_attention_heads=4,
                       num_key_value_heads=2, vocab_size=VOCAB, num_hidden_layers=2)
    return model.to(rt.float64).train()


def _step(model):
    ids = np.random.default_rng(0).integers(0, VOCAB, size=(BATCH, LENGTH))
    step = trace_training(model, rt.tensor(ids))
    seed = np.random.default_rng(1).standard_normal(step.graph.inputs[1].shape)
    return step, {"input_ids": ids, step.seed: seed}


def _eager(model, feeds, seed_name):
    """The same step in eager mode, as the reference: output and parameter gradients."""
    for p in model.parameters():
        p.grad = None
    out = model(rt.tensor(feeds["input_ids"]))
    out.backward(rt.tensor(feeds[seed_name]))
    return out.numpy(), {name: p.grad.numpy() for name, p in model.named_parameters()}


CASES = [("gpt2", {}, 2, 2, False), ("gpt2", {}, 2, 2, True), ("gpt2", {}, 1, 2, False),
         ("gpt2", {"attn_implementation": "sdpa"}, 2, 2, True), ("llama", {}, 2, 2, False),
         ("llama", {}, 1, 2, True), ("gpt2", {}, 4, 1, False), ("gpt2", {}, 1, 4, True)]


@pytest.mark.parametrize("family, config, data, tensor, sp", CASES,
                         ids=[f"{c[0]}{'-sdpa' if c[1] else ''}-dp{c[2]}-tp{c[3]}{'-sp' if c[4] else ''}" for c in CASES])
def test_mesh_of_rank_graphs_gives_the_single_device_step(family, config, data, tensor, sp):
    model = _gpt2(**config) if family == "gpt2" else _llama()
    step, feeds = _step(model)
    out, grads = run_step_on_mesh(step, feeds, data=data, tensor=tensor, sequence_parallel=sp)
    want_out, want_grads = _eager(model, feeds, step.seed)
    np.testing.assert_allclose(out, want_out, rtol=1e-9, atol=1e-12)
    assert set(grads) == set(want_grads)
    for name, g in grads.items():
        np.testing.assert_allclose(g, want_grads[name], rtol=1e-8, atol=1e-11, err_msg=name)


def test_the_traced_step_is_the_eager_step():
    model = _gpt2()
    step, feeds = _step(model)
    out, grads = rt.GraphModule(step.graph)(rt.tensor(feeds["input_ids"]), rt.tensor(feeds[step.seed]))
    want_out, want_grads = _eager(model, feeds, step.seed)
    np.testing.assert_allclose(out.numpy(), want_out, rtol=1e-12)
    for name, g in grads.items():
        np.testing.assert_allclose(g.numpy(), want_grads[name], rtol=1e-10, atol=1e-14, err_msg=name)
