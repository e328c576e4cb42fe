"""``flopcount MODEL --plan ...`` (one training plan per rank) and ``flopcount plan MODEL --gpus N``
(the plans that fit, fastest first)."""

from __future__ import annotations

import json

import pytest

from conftest import assert_bad_input

GPT2_PARAMS = 124_439_808  # the zoo's GPT-2 124M (transformers' GPT2LMHeadModel, tied head)


def _json(result) -> dict:
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def test_data_parallel_plan_holds_mixed_precision_adam_and_all_reduces_the_gradients(run):
    doc = _json(run("gpt2", "-i", "1x32", "--plan", "dp=4", "--global-batch", "8", "--format", "json"))
    assert doc["plan"] == {"dp": 4, "tp": 1, "pp": 1, "micro_batch": 1, "global_batch": 8, "micro_batches": 2,
                           "zero": 0, "sequence_parallel": False, "recompute": "none", "dtype": "bfloat16",
                           "gpus": 4}
    (stage,) = doc["stages"]
    n = stage["params"]
    assert n == GPT2_PARAMS
    # bf16 weights and gradients, fp32 master weights and Adam's two moments: 2 + 2 + 12 bytes
    assert (stage["weights_bytes"], stage["gradients_bytes"], stage["optimizer_bytes"]) == (2 * n, 2 * n, 12 * n)
    # a ring all-reduce of the bf16 gradients: each rank sends 2 (p - 1) / p of them, once a step
    (sync,) = [t for t in doc["traffic"][0] if t["axis"] == "dp"]
    assert (sync["collective"], sync["count"], sync["sent_bytes"]) == ("all_reduce", 1, 2 * 3 * 2 * n // 4)
    assert doc["tokens_per_step"] == 8 * 32


def test_zero_1_partitions_the_optimizer_state_over_the_data_parallel_ranks(run):
    doc = _json(run("gpt2", "-i", "1x32", "--plan", "dp=4", "--global-batch", "8", "--zero", "1", "-f", "json"))
    (stage,) = doc["stages"]
    assert stage["optimizer_bytes"] == 12 * GPT2_PARAMS // 4
    kinds = {(t["collective"], t["moves"]) for t in doc["traffic"][0] if t["axis"] == "dp"}
    assert kinds == {("reduce_scatter", "gradients"), ("all_gather", "weights")}


def test_a_measured_step_time_gives_mfu_by_its_definition(run):
    doc = _json(run("gpt2", "-i", "1x32", "--plan", "dp=2,tp=2", "--global-batch", "8", "--hardware", "h100-sxm",
                    "--step-time", "250ms", "-f", "json"))
    assert doc["step_time_measured"] and doc["step_time_s"] == 0.25
    # PaLM's MFU: model FLOPs per step / (step time x GPUs x peak); the H100 SXM's dense bf16 peak
    assert doc["mfu"] == pytest.approx(doc["model_flops_per_step"] / (0.25 * 4 * 989.5e12))
    # GPT-2 124M: 6N per token for the matrices (the tied head counted once, as the output
    # projection; not the position table, the biases (9·768 a layer) or the norms (4·768 a layer,
    # 2·768 at the end)) plus 12·L·H·Q·T for attention's contractions, whole
    n_matmul = GPT2_PARAMS - 1024 * 768 - 12 * 13 * 768 - 2 * 768
    per_token = 6 * n_matmul + 12 * 12 * 12 * 64 * 32
    assert doc["model_flops_per_step"] == pytest.approx(per_token * doc["tokens_per_step"], rel=1e-9)


def test_the_table_names_the_plan_the_collectives_and_the_convention(run):
    result = run("gpt2", "-i", "1x32", "--plan", "tp=2,pp=2", "--global-batch", "4", "--sequence-parallel",
                 "--recompute", "selective", "--dtype", "fp16", "--hardware", "a100-80gb")
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    assert "dp=1, tp=2, pp=2" in out and "sequence parallel" in out and "recompute selective" in out
    assert "float16" in out and "send_recv" in out and "PaLM" in out and "MFU" in out


def test_a_factory_model_is_planned_from_its_input_shape(run, factory_file):
    doc = _json(run(f"{factory_file}:MLP", "-i", "1x4", "--plan", "dp=2", "--global-batch", "2", "-f", "json"))
    assert doc["stages"][0]["params"] == 4 * 8 + 8 + 8 * 2 + 2
    doc = _json(run(f"{factory_file}:Tagger", "-i", "1x5", "--dtype", "int64", "--plan", "tp=2", "-f", "json"))
    assert doc["plan"]["dtype"] == "bfloat16" and doc["input_shape"] == [5]


def test_plan_search_lists_plans_that_fit_fastest_first(run, tmp_path):
    out = tmp_path / "plans.json"
    result = run("plan", "gpt2", "--gpus", "4", "--hardware", "h100-sxm", "-i", "1x32", "--global-batch", "8",
                 "--top", "3", "--format", "json", "-o", out, "-q")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(out.read_text())
    assert doc["gpus"] == 4 and doc["considered"] >= doc["fitting"] >= len(doc["best"]) > 0
    assert len(doc["best"]) <= 3
    times = [b["step_time_s"] for b in doc["best"]]
    assert times == sorted(times)
    for best in doc["best"]:
        plan = best["plan"]
        assert plan["dp"] * plan["tp"] * plan["pp"] == 4 and plan["global_batch"] == 8
        assert best["fits"] and max(s["peak_bytes"] for s in best["stages"]) <= 80e9


@pytest.mark.parametrize("args, fragments", [
    (["gpt2", "--zero", "1"], ["--zero", "add --plan"]),
    (["gpt2", "--recompute", "full", "--micro-batch", "2"], ["--micro-batch", "--recompute"]),
    (["gpt2", "--plan", "dp=2", "--latency"], ["--latency", "not with --plan"]),
    (["gpt2", "--plan", "dp=2", "--decode", "--context", "64"], ["--decode", "--context", "not with --plan"]),
    (["gpt2", "--prefill", "64", "--zero", "1"], ["--zero", "add --plan"]),
    (["gpt2", "--plan", "dp=2,xp=3"], ["xp=3"]),
    (["gpt2", "--plan", "dp=2", "--global-batch", "3"], ["global batch 3"]),
    (["gpt2", "--plan", "dp=2", "--step-time", "fast"], ["--step-time", "fast"]),
    (["gpt2", "--plan", "dp=2", "--hardware", "h900"], ["h900"]),
    (["gpt2", "--plan", "dp=2", "-f", "csv"], ["csv", "table, json or html"]),
    (["plan", "gpt2", "--gpus", "8"], ["--hardware"]),
    (["plan", "gpt_nine", "--gpus", "8", "--hardware", "h100-sxm"], ["gpt_nine"]),
])
def test_bad_plan_options_are_one_line_errors(run, args, fragments):
    assert_bad_input(run(*args), *fragments)
