"""DeepSeek-V2 and V3 built natively: transformers' outputs on the same weights (a prefill, and a
decode step that attends in the latent space), the router's choices, the latent cache, and the
MACs of a decode step by hand; Llama-3.1's and YaRN's rotary embeddings against transformers."""

from __future__ import annotations

import numpy as np
import pytest

import flopcount.runtime as rt
from flopcount import llm, models
from flopcount.models._hf_architectures import ARCHITECTURES

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from flopcount.models import _hf_folder  # noqa: E402

TINY = dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, num_key_value_heads=4, intermediate_size=128,
            moe_intermediate_size=32, vocab_size=200, bos_token_id=0, eos_token_id=0, pad_token_id=0,
            n_routed_experts=8, num_experts_per_tok=2, n_shared_experts=1, first_k_dense_replace=1, kv_lora_rank=32,
            qk_rope_head_dim=16, qk_nope_head_dim=16, v_head_dim=24)
CONFIGS = {"DeepseekV3ForCausalLM": ("DeepseekV3Config", dict(n_group=4, topk_group=2, q_lora_rank=48)),
           "DeepseekV2ForCausalLM": ("DeepseekV2Config", dict(q_lora_rank=None, topk_method="group_limited_greedy",
                                                              n_group=2, topk_group=1))}


@pytest.fixture(scope="module", params=sorted(CONFIGS))
def pair(request, tmp_path_factory):
    """(transformers' model, ours with its weights) for a small random DeepSeek of each version."""
    name = request.param
    config_name, extra = CONFIGS[name]
    torch.manual_seed(0)
    hf = getattr(transformers, name)(getattr(transformers, config_name)(**TINY, **extra)).eval()
    path = tmp_path_factory.mktemp(name) / name
    hf.save_pretrained(str(path))
    folder = _hf_folder.load(str(path), weights=True)
    assert not folder.torch and folder.architecture == name
    return hf, folder.model, str(path)


def test_prefill_and_a_decode_step_compute_what_transformers_computes(pair):
    hf, ours, _ = pair
    ids = torch.randint(1, 200, (2, 9), generator=torch.Generator().manual_seed(1))
    cache = transformers.DynamicCache(config=hf.config)
    with torch.no_grad():
        prefill = hf(input_ids=ids[:, :8], cache=cache, use_cache=True).logits.numpy()
        step = hf(input_ids=ids[:, 8:], cache=cache, use_cache=True).logits.numpy()
    with rt.no_grad():
        out = ours(rt.tensor(ids[:, :8].numpy()), use_cache=True)
        ours_step = ours(rt.tensor(ids[:, 8:].numpy()), past_key_values=out["past_key_values"], use_cache=True)
    np.testing.assert_allclose(out["logits"].numpy(), prefill, atol=1e-5, rtol=1e-4)
    # the decode step attends in the latent space (kv_b_proj absorbed): the same logits
    np.testing.assert_allclose(ours_step["logits"].numpy(), step, atol=1e-5, rtol=1e-4)
    # the cache (grown in place by the step, as transformers' is) holds the latent and the rotary key
    keys, values = out["past_key_values"][0]
    assert keys.shape == tuple(cache.layers[0].keys.shape) == (2, 1, 9, 32)
    assert values.shape == tuple(cache.layers[0].values.shape) == (2, 1, 9, 16)


def test_the_router_chooses_the_experts_transformers_chooses(pair):
    hf, ours, _ = pair
    x = torch.randn(11, 64, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        _, weights, index = hf.model.layers[1].mlp.gate(x)
    with rt.no_grad():
        our_weights, our_index = ours.model.layers[1].mlp.gate(rt.tensor(x.numpy()))
    order, our_order = np.argsort(index.numpy(), 1), np.argsort(our_index.numpy(), 1)   # top-k in any order
    np.testing.assert_array_equal(np.take_along_axis(index.numpy(), order, 1),
                                  np.take_along_axis(our_index.numpy(), our_order, 1))
    np.testing.assert_allclose(np.take_along_axis(our_weights.numpy(), our_order, 1),
                               np.take_along_axis(weights.numpy(), order, 1), rtol=1e-5)


def test_a_prefill_counts_what_transformers_code_counts(pair):
    """A prefill expands the latent as transformers' code does: the same MACs through the PyTorch path."""
    _, _, path = pair
    native = llm.profile(path, llm.Prefill(12), batch=2)
    through_torch = llm.decoder(_hf_folder.load_with_transformers(path, weights=False).model)
    assert llm.decoder(path).kind == "native" and through_torch.kind == "torch"
    from flopcount.llm.step import count_step

    phase = llm.Prefill(12)
    counted = count_step(through_torch, through_torch.trace(phase, 2), phase, 2)
    assert native.prefill.total.macs == counted.total.macs
    assert native.kv_bytes_per_token == 2 * (32 + 16) * 4


def test_decode_macs_by_hand_with_the_latent_attention_absorbed():
    c = models.info("deepseek_v3_small").config
    h, heads, rank, rope, nope, v = (c[k] for k in ("hidden_size", "num_attention_heads", "kv_lora_rank",
                                                    "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim"))
    batch, context = 3, 40
    keys = context + 1
    attention = (h * c["q_lora_rank"] + c["q_lora_rank"] * heads * (nope + rope) + h * (rank + rope)
                 + heads * nope * rank                       # the query's no-position part into the latent
                 + heads * keys * (rank + rope)              # scores: latents and rotary keys
                 + heads * keys * rank                       # the weighted sum of latents
                 + heads * rank * v + heads * v * h)         # through each head's value block, then o_proj
    dense = 3 * h * c["intermediate_size"]
    moe = c["n_routed_experts"] * h + c["num_experts_per_tok"] * 3 * h * c["moe_intermediate_size"] \
        + 3 * h * c["moe_intermediate_size"]                 # the router, k experts, the shared expert
    expected = batch * (2 * attention + dense + moe + h * c["vocab_size"])
    report = llm.profile("deepseek_v3_small", llm.Decode(context), batch=batch)
    assert report.decode.last.total.macs == expected


def test_deepseek_v3s_config_builds_natively_with_its_parameters_and_latent_cache(tmp_path):
    import sys

    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent.parent / "llm"))
    import published_configs

    path = published_configs.write(tmp_path / "v3", published_configs.DEEPSEEK_V3)
    decoder = llm.decoder(path)
    assert decoder.kind == "native" and decoder.params == 671_026_404_352
    assert round(decoder.moe.active_params / 1e9, 2) == 37.55
    assert llm.kv_bytes_per_token(path, "bfloat16") == 70_272
    assert "DeepseekV3ForCausalLM" in ARCHITECTURES


@pytest.mark.parametrize("rope", [
    {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
     "original_max_position_embeddings": 64},
    {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64},
    {"rope_type": "linear", "factor": 2.0},
])
def test_scaled_rotary_embeddings_compute_what_transformers_computes(rope, tmp_path):
    torch.manual_seed(0)
    config = transformers.LlamaConfig(num_hidden_layers=2, hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
                                      intermediate_size=64, vocab_size=120, max_position_embeddings=512,
                                      rope_parameters={"rope_theta": 10000.0, **rope})
    hf = transformers.LlamaForCausalLM(config).eval()
    hf.save_pretrained(str(tmp_path))
    folder = _hf_folder.load(str(tmp_path), weights=True)
    assert not folder.torch   # built natively
    ids = torch.randint(1, 120, (1, 300), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        expected = hf(input_ids=ids).logits.numpy()
    np.testing.assert_allclose(folder.model(rt.tensor(ids.numpy())).numpy(), expected, atol=2e-5, rtol=1e-4)
