"""Every decoder family against Hugging Face transformers: state dicts load with strict=True under
the same names and shapes, published parameter counts, logits in both attention
implementations (with padding), prefill + decode steps with the KV cache equal to the full
forward and to transformers' cached steps, sliding windows past their length."""

import numpy as np
import pytest

import flopcount.runtime as rt
from flopcount import models
from decoder_checks import FAMILIES, generate_in_steps, hf_forward, hf_model, ours_and_reference, ours_forward, token_ids
from text_checks import state_shapes, transformers_on_meta

SMALL = [f for f in FAMILIES]
LARGE = [(f, name) for f, (_, large, _, _) in FAMILIES.items() for name in large]


@pytest.mark.parametrize("family", SMALL)
def test_small_parameter_count_equals_transformers(family):
    name = FAMILIES[family][0]
    ref = transformers_on_meta(lambda t: hf_model(family, models.info(name).config))
    with rt.meta():
        ours = models.get(name)
    assert state_shapes(ours) == state_shapes(ref)
    assert sum(p.numel() for p in ours.parameters()) == sum(p.numel() for p in ref.parameters()) \
        == models.info(name).params


@pytest.mark.parametrize("family,name", LARGE)
def test_large_presets_have_transformers_layout_and_published_counts(family, name):
    ref = transformers_on_meta(lambda t: hf_model(family, models.info(name).config))
    with rt.meta():
        ours = models.get(name)
    assert state_shapes(ours) == state_shapes(ref)
    assert sum(p.numel() for p in ref.parameters()) == models.info(name).params
    assert sum(p.numel() for p in ours.parameters()) == models.info(name).params


@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
@pytest.mark.parametrize("family", SMALL)
def test_logits_match_transformers(family, implementation):
    torch = pytest.importorskip("torch")
    ours, ref = ours_and_reference(family)
    ours.set_attn_implementation(implementation)
    ref.set_attn_implementation(implementation)
    ids = token_ids(FAMILIES[family][0], 24, batch=2)
    mask = np.ones_like(ids)
    mask[1, 18:] = 0  # the second sequence is padded at the end
    for kwargs in ({}, {"attention_mask": mask}):
        with rt.no_grad():
            mine = ours(rt.tensor(ids), **{k: rt.tensor(v) for k, v in kwargs.items()}).numpy()
        with torch.no_grad():
            theirs = ref(torch.from_numpy(ids), **{k: torch.from_numpy(v) for k, v in kwargs.items()}).logits.numpy()
        assert np.abs(mine - theirs).max() < 1e-4, kwargs


@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
@pytest.mark.parametrize("family", SMALL)
def test_prefill_and_decode_steps_equal_the_full_forward_and_transformers(family, implementation):
    ours, ref = ours_and_reference(family)
    ours.set_attn_implementation(implementation)
    ref.set_attn_implementation(implementation)
    ids = token_ids(FAMILIES[family][0], 22, batch=2, seed=1)  # past the small models' window of 16
    with rt.no_grad():
        full = ours(rt.tensor(ids)).numpy()
    stepped = generate_in_steps(ours_forward, ours, ids, prompt=12)
    theirs = generate_in_steps(hf_forward, ref, ids, prompt=12)
    assert np.abs(stepped - full).max() < 1e-4
    assert np.abs(stepped - theirs).max() < 1e-4


@pytest.mark.parametrize("family", ["mistral", "phi3"])
def test_sliding_window_hides_old_tokens_and_the_cache_keeps_window_minus_one(family):
    name = FAMILIES[family][0]
    window = models.info(name).config["sliding_window"]
    model = models.get(name).eval()
    ids = token_ids(name, window + 6)
    changed = ids.copy()
    changed[:, 0] = (changed[:, 0] + 1) % models.info(name).config["vocab_size"]
    with rt.no_grad():
        a, b = model(rt.tensor(ids)).numpy(), model(rt.tensor(changed)).numpy()
    # a token at position p sees p - window + 1 .. p: token 0 reaches position window - 1 in one layer,
    # and through the two layers' windows positions up to 2 (window - 1); beyond, nothing
    assert np.abs(a[:, window - 1] - b[:, window - 1]).max() > 1e-5
    _, cache = ours_forward(model, ids)
    assert cache.get_seq_length() == window + 6
    assert all(k.shape[-2] == v.shape[-2] == window - 1 for k, v in cache)


def test_cache_given_as_pairs_is_left_as_it_was():
    model = models.get("llama").eval()
    ids = token_ids("llama", 9)
    _, cache = ours_forward(model, ids[:, :8])
    pairs = [tuple(p) for p in cache]
    with rt.no_grad():
        out = model(rt.tensor(ids[:, 8:]), past_key_values=pairs)
    assert [k.shape[-2] for k, _ in pairs] == [8, 8]
    assert out.past_key_values.get_seq_length() == 9
    with rt.no_grad():
        logits = model(rt.tensor(ids[:, 8:]), past_key_values=pairs, use_cache=False)
    np.testing.assert_allclose(logits.numpy(), out.logits.numpy())


def test_gemma_norm_and_embedding_scale():
    model = models.get("gemma")
    assert all((m.weight.numpy() == 0).all() for n, m in model.named_modules() if n.endswith("layernorm"))
    assert float(model.model.embed_tokens.embed_scale.numpy()) == pytest.approx(256 ** 0.5)
    assert model.lm_head.weight is model.model.embed_tokens.weight


@pytest.mark.parametrize("dtype,tolerance", [("float16", 1e-2), ("bfloat16", 4e-2)])  # 11 and 8 significant bits
@pytest.mark.parametrize("family", SMALL)
def test_half_precision_runs_within_half_precision_of_float32(family, dtype, tolerance):
    name = FAMILIES[family][0]
    model = models.get(name).eval()
    ids = rt.tensor(token_ids(name, 20))
    with rt.no_grad():
        reference = model(ids).numpy()
        half = model.to(rt.get_dtype(dtype))(ids)
    assert half.dtype is rt.get_dtype(dtype)
    scale = max(1.0, float(np.abs(reference).max()))
    assert np.abs(half.numpy().astype(np.float32) - reference).max() < tolerance * scale
