"""gpt2: transformers' GPT2LMHeadModel layout with the tied head, Conv1D, causality, MACs, outputs."""

import math

import numpy as np
import pytest

import flopcount.runtime as rt
from flopcount import models
from flopcount.models.gpt2 import Conv1D
from opcheck import op_costs, record
from text_checks import (assert_gradients_match_transformers, eager_and_meta_outputs, logits_before_and_after,
                         outputs_with_transformers, state_shapes, transformers_on_meta, transformers_reference)

D, LAYERS, VOCAB, LENGTH = 768, 12, 50257, 128
SMALL = {"n_layer": 2, "vocab_size": 1000}  # the head over 50,257 tokens would dominate every run


@pytest.fixture(scope="module")
def gpt2():
    rt.manual_seed(0)
    return models.get("gpt2").eval()


@pytest.fixture(scope="module")
def small():
    """Two layers and a small vocabulary: the same code path per layer, fast to run often."""
    rt.manual_seed(1)
    return models.get("gpt2", **SMALL).eval()


def small_ids():
    """32 tokens for the behaviour checks: the code path is the same, the run 4x cheaper."""
    return models.example_input("gpt2").numpy()[:, :32] % SMALL["vocab_size"]


def test_parameter_count_is_the_published_one(gpt2):
    published = 124_439_808  # the 124M "gpt2" checkpoint, lm_head tied to wte (counted once)
    assert sum(p.numel() for p in gpt2.parameters()) == published
    assert models.info("gpt2").params == published


def test_head_is_tied_to_the_token_embedding(gpt2):
    assert gpt2.lm_head.weight is gpt2.transformer.wte.weight
    keys = gpt2.state_dict()
    assert "lm_head.weight" in keys and "transformer.wte.weight" in keys  # both names, as in torch


def test_module_paths_and_shapes(gpt2):
    shapes = state_shapes(gpt2)
    assert len(shapes) == 12 * LAYERS + 5  # wte, wpe, ln_f (2), lm_head
    expected = {
        "transformer.wte.weight": (VOCAB, D),
        "transformer.wpe.weight": (1024, D),
        "transformer.h.0.ln_1.weight": (D,),
        "transformer.h.0.attn.c_attn.weight": (D, 3 * D),  # Conv1D keeps (in, out)
        "transformer.h.0.attn.c_attn.bias": (3 * D,),
        "transformer.h.11.attn.c_proj.weight": (D, D),
        "transformer.h.11.ln_2.bias": (D,),
        "transformer.h.5.mlp.c_fc.weight": (D, 4 * D),
        "transformer.h.5.mlp.c_proj.weight": (4 * D, D),
        "transformer.ln_f.weight": (D,),
        "lm_head.weight": (VOCAB, D),
    }
    for key, shape in expected.items():
        assert shapes[key] == shape, key


def test_initialization_follows_transformers(gpt2):
    block = gpt2.transformer.h[3]
    assert abs(float(np.std(block.attn.c_attn.weight.numpy())) - 0.02) < 5e-4
    assert not block.attn.c_attn.bias.numpy().any()
    scaled = 0.02 / math.sqrt(2 * LAYERS)  # projections into the residual stream
    for proj in (block.attn.c_proj, block.mlp.c_proj):
        assert abs(float(np.std(proj.weight.numpy())) - scaled) < 0.05 * scaled
    assert abs(float(np.std(gpt2.transformer.wpe.weight.numpy())) - 0.02) < 5e-4
    assert (block.ln_1.weight.numpy() == 1).all() and not block.ln_1.bias.numpy().any()


def test_conv1d_is_x_times_weight_plus_bias_and_counts_as_linear():
    layer = Conv1D(5, 3)
    rt.nn.init.normal_(layer.bias)
    x = rt.randn(2, 4, 3)
    out = layer(x)
    expected = x.numpy() @ layer.weight.numpy() + layer.bias.numpy()
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-5, atol=1e-6)
    costs = op_costs(lambda: layer(x))
    total = sum(c.macs for c in costs.values())
    assert total == 2 * 4 * 3 * 5  # rows·in·out


def test_eager_and_meta_shapes(gpt2):
    logits, m_logits = eager_and_meta_outputs(gpt2, "gpt2")
    assert logits.shape == (1, LENGTH, VOCAB) and logits.dtype is rt.float32
    assert (m_logits.shape, m_logits.dtype, m_logits.device.type) == (logits.shape, logits.dtype, "meta")


@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
def test_macs_by_hand(implementation):
    with rt.meta():
        model = models.get("gpt2", attn_implementation=implementation)
    _, events = record(lambda: model(models.example_input("gpt2", device="meta")))
    n = LENGTH
    per_layer = n * D * 3 * D + n * D * D + 2 * n * D * 4 * D + 2 * n * n * D  # c_attn, c_proj, MLP, QKᵀ+PV
    assert sum(e.cost.macs for e in events) == LAYERS * per_layer + n * D * VOCAB
    names = [e.op.name for e in events]
    if implementation == "eager":
        assert names.count("matmul") == 2 * LAYERS
    else:
        assert names.count("scaled_dot_product_attention") == LAYERS and "matmul" not in names


@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
def test_causal_a_token_never_sees_later_tokens(small, implementation):
    ids = small_ids()
    changed = ids.copy()
    changed[:, 20:] = (changed[:, 20:] + 1) % SMALL["vocab_size"]
    a, b = logits_before_and_after(small, ids, changed, implementation)
    np.testing.assert_allclose(a[:, :20], b[:, :20], atol=1e-5)
    assert np.abs(a[:, 20:] - b[:, 20:]).max() > 1e-3


def test_sdpa_path_equals_eager_path(small):
    ids = rt.tensor(small_ids())
    mask = np.ones(ids.shape, np.int64)
    mask[:, 24:] = 0
    outs = {}
    for implementation in ("eager", "sdpa"):
        small.set_attn_implementation(implementation)
        with rt.no_grad():
            outs[implementation] = (small(ids).numpy(), small(ids, attention_mask=rt.tensor(mask)).numpy())
    small.set_attn_implementation("eager")
    for eager, sdpa in zip(outs["eager"], outs["sdpa"]):
        np.testing.assert_allclose(eager, sdpa, atol=1e-4)


# --- against transformers (skipped where it is not installed) ---------------------------------

@pytest.fixture(scope="module")
def reference(small):
    """transformers' GPT2LMHeadModel with the small config; ``small`` gets its weights."""
    return transformers_reference(
        small, lambda t: t.GPT2LMHeadModel(t.GPT2Config(attn_implementation="eager", **SMALL)))


def test_state_dict_names_and_shapes_equal_transformers(gpt2):
    ref = transformers_on_meta(lambda t: t.GPT2LMHeadModel(t.GPT2Config()))
    assert state_shapes(gpt2) == state_shapes(ref)


@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
def test_logits_match_transformers(small, reference, implementation):
    assert small.lm_head.weight is small.transformer.wte.weight  # loading keeps the tie
    ids = small_ids()
    mask = np.ones_like(ids)
    mask[:, 24:] = 0
    for kwargs in ({}, {"attention_mask": mask}):
        ours, theirs = outputs_with_transformers(small, reference, ids, kwargs, implementation)
        assert np.abs(ours.numpy() - theirs.logits.numpy()).max() < 1e-4


def test_gradients_match_transformers_through_the_tied_head(small, reference):
    # wte's gradient includes the head's share
    assert_gradients_match_transformers(small, reference, small_ids(), SMALL["vocab_size"])


@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
def test_prefill_and_decode_steps_equal_the_full_forward_and_transformers(small, reference, implementation):
    from decoder_checks import generate_in_steps, hf_forward, ours_forward

    small.set_attn_implementation(implementation)
    reference.set_attn_implementation(implementation)
    try:
        ids = small_ids()[:, :20]
        with rt.no_grad():
            full = small(rt.tensor(ids)).numpy()
        stepped = generate_in_steps(ours_forward, small, ids, prompt=12)
        theirs = generate_in_steps(hf_forward, reference, ids, prompt=12)
    finally:
        small.set_attn_implementation("eager")
        reference.set_attn_implementation("eager")
    assert np.abs(stepped - full).max() < 1e-4
    assert np.abs(stepped - theirs).max() < 1e-4
