"""llama, llama2_7b, llama3_8b: LlamaForCausalLM layout, GQA, rotary, SwiGLU, meta presets, outputs."""

import numpy as np
import pytest

import flopcount.runtime as rt
from flopcount import models
from flopcount.models.llama import LlamaRotaryEmbedding, LlamaConfig, apply_rotary_pos_emb
from opcheck import record
from peak_memory import traced_peak
from text_checks import (assert_gradients_match_transformers, eager_and_meta_outputs, logits_before_and_after,
                         outputs_with_transformers, state_shapes, transformers_on_meta, transformers_reference)

LENGTH = 128
SMALL = models.info("llama").config


def params_by_hand(vocab, d, ff, layers, heads, kv_heads, tied=False):
    head_dim = d // heads
    attention = d * heads * head_dim * 2 + d * kv_heads * head_dim * 2  # q, o; k, v (no biases)
    per_layer = attention + 3 * d * ff + 2 * d  # SwiGLU MLP, two RMSNorm weights
    return vocab * d + layers * per_layer + d + (0 if tied else vocab * d)  # embed, layers, norm, head


def macs_by_hand(n, vocab, d, ff, layers, heads, kv_heads):
    head_dim = d // heads
    projections = n * d * (2 * heads + 2 * kv_heads) * head_dim + 3 * n * d * ff
    attention = 2 * heads * n * n * head_dim  # QKᵀ and PV over all query heads (kv repeated)
    return layers * (projections + attention) + n * d * vocab


def _shape_args(config):
    return (config["vocab_size"], config["hidden_size"], config["intermediate_size"],
            config["num_hidden_layers"], config["num_attention_heads"], config["num_key_value_heads"])


@pytest.fixture(scope="module")
def llama():
    rt.manual_seed(0)
    return models.get("llama").eval()


def test_small_parameter_count(llama):
    expected = params_by_hand(*_shape_args(SMALL))
    assert expected == 17_769_728 == models.info("llama").params
    assert sum(p.numel() for p in llama.parameters()) == expected


@pytest.mark.parametrize("name,published", [("llama2_7b", 6_738_415_616), ("llama3_8b", 8_030_261_248)])
def test_large_presets_on_meta(name, published):
    config = models.info(name).config
    assert params_by_hand(*_shape_args(config)) == published == models.info(name).params
    with traced_peak() as memory:
        with rt.meta():
            model = models.get(name)
        logits, events = record(lambda: model(models.example_input(name, device="meta")))
    assert sum(p.numel() for p in model.parameters()) == published
    assert all(p.data is None for p in model.parameters())
    assert logits.shape == (1, LENGTH, config["vocab_size"]) and logits.device.type == "meta"
    assert sum(e.cost.macs for e in events) == macs_by_hand(LENGTH, *_shape_args(config))
    assert memory.peak < 32 * 2 ** 20, f"{name} on meta allocated {memory.peak / 2 ** 20:.1f} MiB"


def test_llama3_uses_grouped_query_attention():
    with rt.meta():
        model = models.get("llama3_8b")
    attn = model.model.layers[0].self_attn
    assert attn.q_proj.weight.shape == (4096, 4096)
    assert attn.k_proj.weight.shape == attn.v_proj.weight.shape == (8 * 128, 4096)
    assert attn.num_key_value_groups == 4
    assert model.config.rope_theta == 500000.0


def test_module_paths_and_initialization(llama):
    state = llama.state_dict()
    layer = "model.layers.1."
    for key in ("self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
                "self_attn.o_proj.weight", "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight",
                "input_layernorm.weight", "post_attention_layernorm.weight"):
        assert layer + key in state
    assert {"model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"} <= set(state)
    assert len(state) == 9 * 2 + 3  # rotary frequencies are not state
    assert llama.lm_head.weight is not llama.model.embed_tokens.weight
    assert abs(float(np.std(llama.model.layers[0].mlp.up_proj.weight.numpy())) - 0.02) < 5e-4
    assert abs(float(np.std(llama.lm_head.weight.numpy())) - 0.02) < 5e-4
    assert (llama.model.norm.weight.numpy() == 1).all()


def test_eager_and_meta_shapes(llama):
    logits, m_logits = eager_and_meta_outputs(llama, "llama")
    assert logits.shape == (1, LENGTH, 32000) and logits.dtype is rt.float32
    assert np.isfinite(logits.numpy()).all()
    assert (m_logits.shape, m_logits.dtype, m_logits.device.type) == (logits.shape, logits.dtype, "meta")


@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
def test_small_macs_by_hand(implementation):
    with rt.meta():
        model = models.get("llama", attn_implementation=implementation)
    _, events = record(lambda: model(models.example_input("llama", device="meta")))
    assert sum(e.cost.macs for e in events) == macs_by_hand(LENGTH, *_shape_args(SMALL))


def test_rotary_embedding_is_a_rotation_by_position():
    config = LlamaConfig(hidden_size=64, num_attention_heads=2, rope_theta=10000.0)
    rope = LlamaRotaryEmbedding(config)
    d = config.head_dim
    x = rt.randn(1, 1, 6, d)
    cos, sin = rope(x, rt.arange(6).unsqueeze(0))
    rotated, _ = apply_rotary_pos_emb(x, x, cos, sin)
    # numpy reference: pair (i, i + d/2) turned by angle pos·θ^(-2i/d)
    angle = np.arange(6)[:, None] * 10000.0 ** (-np.arange(0, d, 2) / d)
    a, b = x.numpy()[0, 0, :, : d // 2], x.numpy()[0, 0, :, d // 2:]
    expected = np.concatenate([a * np.cos(angle) - b * np.sin(angle), b * np.cos(angle) + a * np.sin(angle)], -1)
    np.testing.assert_allclose(rotated.numpy()[0, 0], expected, rtol=1e-4, atol=1e-5)


def _ids():
    """32 tokens for the behaviour checks: the code path is the same, the run 4x cheaper."""
    return models.example_input("llama").numpy()[:, :32]


@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
def test_causal_a_token_never_sees_later_tokens(llama, implementation):
    ids = _ids()
    changed = ids.copy()
    changed[:, 20:] = (changed[:, 20:] + 1) % 32000
    a, b = logits_before_and_after(llama, ids, changed, implementation)
    np.testing.assert_allclose(a[:, :20], b[:, :20], atol=1e-5)
    assert np.abs(a[:, 20:] - b[:, 20:]).max() > 1e-4


# --- against transformers (skipped where it is not installed) ---------------------------------

def _hf_config(config):
    transformers = pytest.importorskip("transformers")
    return transformers.LlamaConfig(attn_implementation="eager", **config)


@pytest.fixture(scope="module")
def reference(llama):
    """transformers' LlamaForCausalLM with the small config; ``llama`` gets its weights."""
    return transformers_reference(llama, lambda t: t.LlamaForCausalLM(_hf_config(SMALL)))


@pytest.mark.parametrize("name", ["llama", "llama2_7b", "llama3_8b"])
def test_state_dict_names_and_shapes_equal_transformers(name):
    ref = transformers_on_meta(lambda t: t.LlamaForCausalLM(_hf_config(models.info(name).config)))
    with rt.meta():
        ours = models.get(name)
    assert state_shapes(ours) == state_shapes(ref)
    assert sum(p.numel() for p in ref.parameters()) == models.info(name).params
    assert ref.config.rope_parameters["rope_theta"] == ours.config.rope_theta


@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
def test_logits_match_transformers(llama, reference, implementation):
    ids = _ids()
    mask = np.ones_like(ids)
    mask[:, 24:] = 0
    for kwargs in ({}, {"attention_mask": mask}):
        ours, theirs = outputs_with_transformers(llama, reference, ids, kwargs, implementation)
        assert np.abs(ours.numpy() - theirs.logits.numpy()).max() < 1e-4


def test_gradients_match_transformers(llama, reference):
    assert_gradients_match_transformers(llama, reference, _ids(), 32000)
