"""--dtype (the model's, or the inputs'), --weights and --hardware, and ``flopcount hardware``."""

from __future__ import annotations

import json

import pytest

import flopcount
from flopcount import hardware
from conftest import assert_bad_input


def _json(result) -> dict:
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def test_llama2_7b_decode_step_in_bf16_on_an_h100(run):
    doc = _json(run("llama2_7b", "-i", "1x1", "--dtype", "bf16", "--hardware", "h100-sxm", "--format", "json"))
    # 6,738,415,616 parameters (Meta's model card) at two bytes each: 13.48 GB
    assert doc["totals"]["params"] == 6_738_415_616
    assert doc["memory"]["parameters"] == {"bfloat16": 2 * 6_738_415_616}
    # one token reads every weight once (the embedding table but its row): memory-bound at 3.35 TB/s
    embedding = 32_000 * 4_096 * 2
    assert doc["totals"]["roofline_ms"] / 1e3 == pytest.approx((2 * 6_738_415_616 - embedding) / 3.35e12, rel=0.01)
    assert doc["totals"]["roofline_bound"] == "memory"
    assert all(op["bound"] == "memory" for op in doc["ops"] if op["op"] == "linear")
    # the token ids stayed int64 while the activations are bfloat16
    embedding_op = next(op for op in doc["ops"] if op["op"] == "embedding")
    assert embedding_op["input_dtypes"] == ["bfloat16", "int64"]


def test_the_command_line_is_profile_with_the_same_options(run):
    doc = _json(run("gpt2", "-i", "1x16", "--dtype", "float16", "--weights", "int4", "--hardware", "a100-80gb",
                    "--format", "json"))
    report = flopcount.profile("gpt2", input_shape=(1, 16), dtype="float16", weights="int4", hardware="a100-80gb",
                               device="meta")
    assert doc["totals"]["roofline_ms"] == pytest.approx(report.totals["roofline_ms"])
    assert doc["memory"]["parameter_bytes"] == report.memory.parameter_bytes
    assert "int4" in doc["memory"]["parameters"] and doc["dtype"] == "float16"


def test_an_integer_dtype_is_still_the_inputs(run, factory_file):
    doc = _json(run(f"{factory_file}:tagger", "-i", "2x5", "--dtype", "int64", "--hardware", "l4",
                    "--format", "json"))
    assert doc["ops"][0]["input_dtypes"] == ["float32", "int64"]     # the weights stay float32
    assert doc["totals"]["roofline_ms"] > 0


def test_measured_latency_beside_the_roofline(run, factory_file):
    result = run(f"{factory_file}:mlp", "-i", "8x4", "--hardware", "cpu", "--latency", "--repeat", "2",
                 "--format", "json")
    totals = _json(result)["totals"]
    assert totals["roofline_fraction"] == pytest.approx(totals["roofline_ms"] / totals["latency_ms"])


def test_bad_values_are_one_line_errors(run, native_file):
    assert_bad_input(run("resnet18", "--hardware", "h100"), "unknown hardware 'h100'", "h100-sxm")
    assert_bad_input(run("resnet18", "--weights", "int3"), "unknown weight format 'int3'")
    assert_bad_input(run("resnet18", "--dtype", "bf17"), "--dtype 'bf17'")
    assert_bad_input(run(native_file, "--dtype", "bf16"), "keeps the dtypes it was made with")


def test_hardware_command_lists_every_profile(run):
    doc = _json(run("hardware", "--format", "json"))
    assert [p["name"] for p in doc] == [n for n in hardware.names() if n != "cpu"]
    h100 = next(p for p in doc if p["name"] == "h100-sxm")
    # the datasheet's 3.35 TB/s and 1,979 TFLOPS bf16 "with sparsity", dense: half
    assert h100["memory_bandwidth"] == 3.35e12 and h100["peak_flops"]["bfloat16"] == 989.5e12
    text = run("hardware", "--format", "csv").stdout
    assert text.splitlines()[0].startswith("Name,Device,BF16 TFLOP/s") and "mi300x" in text


def test_compare_puts_the_rooflines_side_by_side(run):
    result = run("compare", "resnet18", "--input-shape-b", "4x3x224x224", "--hardware", "a100-80gb",
                 "--format", "csv", "-d", "0")
    assert result.exit_code == 0, result.stderr
    line = next(l for l in result.stdout.splitlines() if l.startswith("Roofline (a100-80gb)"))
    a, b = (flopcount.profile("resnet18", input_shape=shape, hardware="a100-80gb").totals["roofline_ms"]
            for shape in ((1, 3, 224, 224), (4, 3, 224, 224)))
    _, ms_a, ms_b, ratio = line.split(",")
    assert (float(ms_a), float(ms_b), float(ratio)) == pytest.approx((a, b, b / a))
