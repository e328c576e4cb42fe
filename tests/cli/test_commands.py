"""``flopcount models``, ``flopcount compare``, ``--version``, ``--help``, and which of a zoo
name, a subcommand and a file a word means."""

from __future__ import annotations

import csv
import io
import json
import shutil

import pytest

import flopcount
from flopcount import models
from conftest import assert_bad_input


def test_models_lists_the_zoo(run):
    result = run("models")
    assert result.exit_code == 0
    for name in models.names():
        assert name in result.stdout
    assert "1x3x224x224" in result.stdout and "25.56 M" in result.stdout      # resnet50's input and size
    doc = json.loads(run("models", "--format", "json").stdout)
    assert [m["name"] for m in doc] == models.names()
    for entry in doc:
        info = models.info(entry["name"])
        assert entry["params"] == info.params
        assert entry["inputs"] == [{"name": n, "shape": [1, *s], "dtype": d} for n, s, d, _ in info.inputs]
    bert = next(m for m in doc if m["name"] == "bert_base")
    assert bert["inputs"] == [{"name": "input_ids", "shape": [1, 128], "dtype": "int64"}]
    table = list(csv.reader(io.StringIO(run("models", "--format", "csv").stdout)))
    assert table[0] == ["name", "family", "default_input", "params", "description"]
    assert len(table) == len(models.names()) + 1


def test_a_file_named_like_a_subcommand_or_a_zoo_model(run, native_file, tmp_path, monkeypatch):
    zoo_macs = flopcount.profile("resnet18", device="meta").macs
    monkeypatch.chdir(tmp_path)
    shutil.copy(native_file, "models")
    shutil.copy(native_file, "resnet18")
    listing = run("models")
    assert listing.exit_code == 0 and "resnet50" in listing.stdout          # the subcommand wins
    doc = json.loads(run("./models", "--format", "json").stdout)              # ./ names the file
    assert doc["totals"]["macs"] == 3 * 4 * 8 + 3 * 8 * 2
    path = run("resnet18", "--format", "json")                                # the existing path wins ...
    assert json.loads(path.stdout)["totals"]["macs"] == 3 * 4 * 8 + 3 * 8 * 2
    assert "write zoo:resnet18 for the zoo model" in path.stderr              # ... and says so
    assert run("resnet18", "--format", "json", "--quiet").stderr == ""
    doc = json.loads(run("zoo:resnet18", "--format", "json").stdout)
    assert doc["model"] == "resnet18" and doc["totals"]["macs"] == zoo_macs


def test_compare_two_models(run):
    a = flopcount.profile("resnet18", device="meta")
    b = flopcount.profile("resnet50", device="meta")
    doc = json.loads(run("compare", "resnet18", "resnet50", "--format", "json").stdout)
    assert doc["a"]["totals"]["macs"] == a.macs and doc["b"]["totals"]["macs"] == b.macs
    assert doc["ratio_b_over_a"]["macs"] == pytest.approx(b.macs / a.macs)
    text = run("compare", "resnet18", "resnet50").stdout
    assert "A: resnet18 (1x3x224x224)" in text and "B: resnet50 (1x3x224x224)" in text
    assert f"{b.macs / a.macs:.2f}x" in text
    assert "layer1" in text                                    # modules both have, side by side


def test_compare_one_model_on_two_inputs(run):
    small = flopcount.profile("resnet18", device="meta")
    large = flopcount.profile("resnet18", input_shape=(1, 3, 448, 448), device="meta")
    result = run("compare", "resnet18", "--input-shape-b", "1x3x448x448", "--format", "csv")
    table = {r["metric"]: r for r in csv.DictReader(io.StringIO(result.stdout))}
    assert int(table["MACs"]["a"]) == small.macs and int(table["MACs"]["b"]) == large.macs
    assert float(table["Params"]["b_over_a"]) == 1.0
    md = run("compare", "resnet18", "resnet18", "--input-shape-a", "1x3x112x112", "--format", "markdown").stdout
    assert "| MACs" in md and "1x3x112x112" in md and "| layer4" in md
    assert_bad_input(run("compare", "resnet18"), "compare needs two models")
    assert_bad_input(run("compare", "resnet18", "resnet51"), "unknown model 'resnet51'")


def test_version_and_help(run):
    assert run("--version").stdout.strip() == f"flopcount {flopcount.__version__}"
    top = run("--help").stdout
    assert "Examples:" in top and "flopcount models" in top and "flopcount compare" in top
    assert run().stdout == top                                  # no arguments: the help, exit 0
    for command in ("profile", "models", "compare", "hardware"):
        text = run(command, "--help").stdout
        assert "Examples:" in text, command
    profile_help = run("profile", "--help").stdout
    for option in ("--input-shape", "--dtype", "--batch", "--mode", "--device", "--latency", "--repeat",
                   "--warmup", "--backward", "--convention", "--depth", "--top", "--sort", "--by", "--format",
                   "--output", "--strict", "--quiet", "--debug", "--factory-arg", "--weights", "--hardware"):
        assert option in profile_help, option
    assert "RUNS that Python file" in profile_help and "nothing in them is executed" in profile_help
