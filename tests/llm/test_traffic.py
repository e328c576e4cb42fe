"""Bytes by origin in one decode step of the small Llama (GQA: 8 query heads, 2 key/value heads),
by hand: weights per projection, the embedding's one row, the cache read by the attention
(eager repeats each key/value head for its 4 query heads; sdpa reads each once) and written by
cache_append (the new position only)."""

import pytest

import flopcount.runtime as rt
from flopcount import llm, models

CONFIG = models.info("llama").config
D, H, KV, FF = CONFIG["hidden_size"], CONFIG["num_attention_heads"], CONFIG["num_key_value_heads"], \
    CONFIG["intermediate_size"]
DK = D // H
B, C, F32 = 3, 40, 4


def _layer_ops(report):
    return [op for op in report.decode.last.ops if op.group == "model.layers.0"]


@pytest.mark.parametrize("implementation,kv_heads_read", [("eager", H), ("sdpa", KV)])
def test_one_decode_layer_by_hand(implementation, kv_heads_read):
    report = llm.profile("llama", llm.Decode(C), batch=B, attn_implementation=implementation)
    ops = _layer_ops(report)
    by_scope = {op.scope.rpartition(".")[2]: op for op in ops if op.op == "linear"}
    assert by_scope["q_proj"].weight_read == D * D * F32
    assert by_scope["k_proj"].weight_read == by_scope["v_proj"].weight_read == D * KV * DK * F32
    assert by_scope["gate_proj"].weight_read == by_scope["down_proj"].weight_read == D * FF * F32
    # keys and values of C cached positions plus the new one
    cache_read = sum(op.kv_read for op in ops)
    assert cache_read == 2 * B * kv_heads_read * (C + 1) * DK * F32
    appends = [op for op in ops if op.op == "cache_append"]
    assert len(appends) == 2
    assert all(op.kv_written == B * KV * 1 * DK * F32 and op.kv_read == 0 for op in appends)
    assert all(op.activation_read == op.kv_written for op in appends)  # the new rows, read once
    norms = [op for op in ops if op.op == "rms_norm"]
    assert all(op.weight_read == D * F32 for op in norms)


def test_the_embedding_reads_its_rows_and_the_head_its_whole_weight():
    step = llm.profile("llama", llm.Decode(C), batch=B).decode.last
    embed = [op for op in step.ops if op.op == "embedding"]
    head = [op for op in step.ops if op.group == "lm_head" and op.op == "linear"]
    assert embed[0].weight_read == B * D * F32
    assert head[0].weight_read == CONFIG["vocab_size"] * D * F32


def test_expert_slices_of_a_stacked_weight_are_weights():
    step = llm.profile("mixtral", llm.Decode(5), batch=1).decode.last
    cfg = models.info("mixtral").config
    d, f = cfg["hidden_size"], cfg["intermediate_size"]
    experts = [op for op in step.ops if op.scope.endswith("mlp.experts") and op.op == "matmul"]
    # balanced routing at one token: its two choices go to two experts, one row each, and the
    # two experts run as one batched matmul per projection (gate and up fused, then down)
    assert len(experts) == 2 * cfg["num_hidden_layers"]
    gate_up, down = experts[0], experts[1]
    assert gate_up.weight_read == 2 * (2 * f * d) * F32
    assert gate_up.shape == (2, 1, 2 * f)
    assert down.weight_read == 2 * (f * d) * F32
    assert down.shape == (2, 1, d)
    assert gate_up.macs == 2 * 2 * f * d and down.macs == 2 * f * d


def test_memory_is_weights_cache_and_activations():
    report = llm.profile("llama", llm.Decode(C), batch=B)
    step = report.decode.last
    assert step.kv_cache_bytes == llm.kv_cache_bytes(_meta(), C + 1, B, rt.float32)
    logits = B * CONFIG["vocab_size"] * F32  # the step's output, alive at its end
    assert logits <= step.activation_peak < logits + step.kv_cache_bytes
    assert step.peak_memory == report.weight_bytes + step.kv_cache_bytes + step.activation_peak


def _meta():
    with rt.meta():
        return models.get("llama")
