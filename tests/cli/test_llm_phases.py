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
