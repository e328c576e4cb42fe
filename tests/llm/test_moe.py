"""Mixture of experts: Mixtral 8x7B's total and active parameters, FLOPs per token with top-2
routing, and the experts a decode step touches (formula against a simulation of random routing)."""

import numpy as np
import pytest

import flopcount.runtime as rt
from flopcount import llm, models
from flopcount.llm.moe import expected_experts

HALF = getattr(rt, "bfloat16", rt.float16)
CONFIG = models.info("mixtral_8x7b").config
L, D, FF, E, K = (CONFIG[k] for k in ("num_hidden_layers", "hidden_size", "intermediate_size", "num_local_experts",
                                      "num_experts_per_tok"))
H, KV, V = CONFIG["num_attention_heads"], CONFIG["num_key_value_heads"], CONFIG["vocab_size"]
DK = D // H


@pytest.fixture(scope="module")
def decode():
    return llm.profile("mixtral_8x7b", llm.Decode(context=1024), dtype=HALF)


def test_total_and_active_parameters(decode):
    moe = decode.moe
    assert (moe.layers, moe.experts, moe.top_k) == (32, 8, 2)
    assert moe.expert_params == 3 * D * FF
    assert moe.total_params == 46_702_792_704
    assert moe.active_params == 12_879_925_248  # "12.9B active parameters per token"
    assert moe.active_params == moe.total_params - L * (E - K) * 3 * D * FF


def test_decode_macs_per_token_count_the_top_k_experts(decode):
    c = 1024
    per_layer = D * (2 * H + 2 * KV) * DK + D * E + K * 3 * D * FF + 2 * H * (c + 1) * DK
    assert decode.decode.last.total.macs == L * per_layer + D * V
    assert any("balanced" in note for note in decode.notes)


def test_expected_experts_formula_against_random_routing():
    rng = np.random.default_rng(0)
    for batch in (1, 2, 8, 32):
        touched = [len(set(np.concatenate([rng.choice(E, K, replace=False) for _ in range(batch)])))
                   for _ in range(4000)]
        assert np.mean(touched) == pytest.approx(expected_experts(E, K, batch), rel=0.02)
    assert expected_experts(E, K, 1) == K


def test_expert_weights_read_per_decode_step():
    report = llm.profile("mixtral_8x7b", llm.Decode(context=16), batch=8, dtype=HALF)
    moe = report.moe
    itemsize = 2
    expected = L * expected_experts(E, K, 8) * 3 * D * FF * itemsize
    assert moe.expert_bytes_read(8, 16) == pytest.approx(expected)
    # the meta trace's balanced routing sends 2 of the 16 assignments to each expert: all 8 run
    step = report.decode.last
    expert_reads = sum(op.weight_read for op in step.ops if op.scope.endswith("mlp.experts"))
    assert expert_reads == L * E * 3 * D * FF * itemsize


def test_summary_of_a_dense_model_is_none():
    assert llm.profile("llama", llm.Decode(4)).moe is None
