"""``flopcount MODEL --prefill N | --decode --context N | --generate P:N``: the traced LLM phases
on the command line, checked against hand-derived figures and against ``profile()``."""

from __future__ import annotations

import json

import numpy as np
import pytest

import flopcount
import flopcount.runtime as rt
from flopcount import models
from conftest import assert_bad_input

LLAMA2_7B_PARAMS = 6_738_415_616   # Meta's model card


def _json(result) -> dict:
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def test_llama2_7b_decode_in_bf16_kv_cache_by_hand(run):
    doc = _json(run("llama2_7b", "--decode", "--context", "2048", "--dtype", "bf16", "-f", "json"))
    assert doc["params"] == LLAMA2_7B_PARAMS
    assert doc["weight_bytes"] == 2 * LLAMA2_7B_PARAMS
    # keys and values, 32 layers, 32 heads of 128, two bytes each
    per_token = 2 * 32 * 32 * 128 * 2
    assert doc["kv_bytes_per_token"] == per_token == 524_288
    assert doc["kv_cache_bytes"] == (2048 + 1) * per_token   # the new token's row is cached too


def test_prefill_counts_what_profile_counts_on_the_same_prompt(run):
    doc = _json(run("llama", "--prefill", "16", "-f", "json"))
    net = models.get("llama").eval()
    ids = rt.tensor(np.zeros((1, 16), np.int64))
    assert doc["prefill"]["total"]["macs"] == flopcount.profile(net, ids).macs


def test_generate_on_the_table_and_in_markdown(run):
    result = run("llama", "--generate", "8:4", "-f", "markdown")
    assert result.exit_code == 0, result.stderr
    assert "prefill" in result.stdout and "|" in result.stdout


@pytest.mark.parametrize("args,fragment", [
    (("--generate", "8"), "--generate takes PROMPT:NEW_TOKENS"),
    (("--decode",), "--decode needs --context"),
    (("--prefill", "8", "--decode", "--context", "4"), "choose one phase"),
    (("--prefill", "8", "-i", "1x8"), "--input-shape does not apply to an LLM phase"),
    (("--prefill", "8", "--latency"), "--latency does not apply to an LLM phase"),
    (("--prefill", "8", "-f", "csv"), "--format csv is not available for an LLM phase"),
])
def test_bad_phase_options_are_one_line(run, args, fragment):
    assert_bad_input(run("llama", *args), fragment)


# --- Hugging Face folders the phases cannot take: one line, exit 2, nothing written ---------------

BAD_FOLDERS = {
    "unknown model_type 'foo'": {"architectures": ["FooForCausalLM"], "model_type": "foo", "hidden_size": 64},
    "needs the model's own Python code (auto_map, trust_remote_code), which flopcount never runs; it was not run": {
        "architectures": ["FooForCausalLM"], "model_type": "foo",
        "auto_map": {"AutoModelForCausalLM": "modeling_foo.FooForCausalLM"}},
    # transformers builds it (it checks no head counts) and its forward then fails
    "the model failed to run on (1, 1) token ids (RuntimeError": {
        "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 64, "num_attention_heads": 5,
        "num_key_value_heads": 3, "num_hidden_layers": 1, "vocab_size": 100},
    "LLM phases need a causal language model that keeps a cache between steps": {
        "architectures": ["BertModel"], "model_type": "bert", "hidden_size": 64, "num_attention_heads": 4,
        "num_hidden_layers": 1, "intermediate_size": 64, "vocab_size": 100},
}


@pytest.mark.parametrize("fragment", list(BAD_FOLDERS))
def test_a_folder_the_phases_cannot_take_is_one_line(run, tmp_path, fragment):
    pytest.importorskip("transformers")
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(BAD_FOLDERS[fragment]))
    out = tmp_path / "report.txt"
    assert_bad_input(run(folder, "--decode", "--context", "8", "-o", out), fragment)
    assert not out.exists()


@pytest.mark.parametrize("args,fragment", [
    (("--decode", "--context", "4", "--moe-routing", "worst"),
     "--moe-routing worst applies to a mixture of experts; llama has no expert layers"),
    (("--kv-dtype", "fp8"), "--kv-dtype goes with an LLM phase"),
    (("--decode", "--context", "4", "--kv-dtype", "fp7"), "--kv-dtype: unknown dtype 'fp7'"),
    (("--fit",), "--fit needs --hardware NAME"),
    (("--fit", "--hardware", "h100-sxm", "--prefill", "8"), "--fit sizes the cache for serving"),
])
def test_bad_moe_cache_and_fit_options_are_one_line(run, args, fragment):
    assert_bad_input(run("llama", *args), fragment)


def test_fit_by_hand_for_llama2_7b_in_int4_with_an_fp8_cache(run):
    doc = _json(run("llama2_7b", "--fit", "--hardware", "h100-sxm", "--dtype", "bf16", "--weights", "int4",
                    "--kv-dtype", "fp8", "-f", "json"))
    per_token = 2 * 32 * 32 * 128 * 1            # keys and values, one byte each
    assert doc["kv_bytes_per_token"] == per_token
    free = 80e9 - doc["weight_bytes"]
    assert doc["longest_context"] == int(free // per_token)
    assert doc["largest_batch"] == int(free // (4096 * per_token)) and doc["context"] == 4096
    # the int4 linear weights at 4.125 bits, embeddings, norms and lm_head in bf16
    linear = 32 * (4 * 4096 * 4096 + 3 * 4096 * 11008)
    assert doc["weight_bytes"] == linear * 4.125 / 8 + (LLAMA2_7B_PARAMS - linear) * 2
