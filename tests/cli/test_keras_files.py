"""``flopcount model.keras`` on the command line: the Keras layers as rows, ``--latency`` with the
weights, and every bad file (truncated, a zip that is not Keras, a broken config, a Lambda, no
weights to run) in one line with exit code 2. A fresh interpreter shows Keras is never imported."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile

import pytest

from keras_models import keras_or_skip, saved

from conftest import assert_bad_input

keras_or_skip()

# Keras' own numpy 2 deprecation notices while it saves, nothing of flopcount's
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:keras")

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    return saved(tmp_path_factory.mktemp("keras_cli"))


def test_counts_a_keras_file_layer_by_layer(run, files):
    path, model = files["mlp"]
    result = run(path, "--format", "json")
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["totals"]["params"] == model.count_params()
    assert report["totals"]["macs"] == 8 * 16 + 16 * 4
    names = [row["name"] for row in report["rows"] if row.get("depth") == 1]
    assert sorted(names) == sorted(layer.name for layer in model.layers)


def test_latency_runs_the_weights(run, files):
    result = run(files["cnn"][0], "--latency", "--repeat", "2", "--warmup", "1")
    assert result.exit_code == 0, result.stderr
    assert "latency:" in result.stdout and "device: cpu" in result.stdout


def test_truncated_file_is_one_line(run, files, tmp_path):
    data = open(files["cnn"][0], "rb").read()
    path = tmp_path / "truncated.keras"
    path.write_bytes(data[: len(data) // 2])
    assert_bad_input(run(path), str(path), "truncated or damaged")


def test_zip_that_is_not_keras_is_one_line(run, tmp_path):
    path = tmp_path / "notes.keras"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("config.json", "{}")
        archive.writestr("notes.txt", "hello")
    assert_bad_input(run(path), str(path), "no model file flopcount reads")


def test_broken_config_is_one_line(run, tmp_path):
    path = tmp_path / "broken.keras"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("config.json", '{"class_name": "Sequential", "config": {"layers": [')
        archive.writestr("metadata.json", '{"keras_version": "3.15.1"}')
    assert_bad_input(run(path), str(path), "config.json is not readable JSON")


def test_lambda_is_refused_in_one_line(run, files):
    path = files["lambda"][0]
    assert_bad_input(run(path), path, "'doubler'", "Lambda layer", "never runs")


def test_no_weights_to_run_is_one_line(run, files, tmp_path):
    path = tmp_path / "no_weights.keras"
    with zipfile.ZipFile(files["mlp"][0]) as source, zipfile.ZipFile(path, "w") as target:
        for name in source.namelist():
            if name != "model.weights.h5":
                target.writestr(name, source.read(name))
    assert run(path).exit_code == 0   # counting needs no weights
    assert_bad_input(run(path, "--latency"), str(path), "has no model.weights.h5")


def test_keras_is_never_imported(files, tmp_path):
    code = ("import sys, flopcount; r = flopcount.profile(sys.argv[1], latency=True, repeat=1, warmup=0); "
            "print(r.params, sorted(m for m in ('keras', 'jax', 'tensorflow') if m in sys.modules))")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "PYTHON", "KERAS"))}
    env["PYTHONPATH"] = REPO
    proc = subprocess.run([sys.executable, "-c", code, files["two_inputs"][0]], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [str(files["two_inputs"][1].count_params()), "[]"]
