"""TensorFlow Lite files on the command line: found by content, counted, timed; bad files in
one line."""

from __future__ import annotations

import json

import pytest
from conftest import assert_bad_input

pytest.importorskip("tflite")
import tflite_models as models


@pytest.fixture
def cnn_file(tmp_path) -> str:
    path = tmp_path / "cnn.tflite"
    path.write_bytes(models.int8_cnn())
    return str(path)


def test_a_tflite_file_is_counted(run, cnn_file):
    result = run(cnn_file, "--format", "json")
    assert result.exit_code == 0, result.stderr
    totals = json.loads(result.stdout)["totals"]
    # conv 8x8x8x3x3x3 + depthwise 4x4x8x3x3 + pointwise 4x4x8x8 + fully connected 10x32
    assert totals["macs"] == 8 * 8 * 8 * 27 + 4 * 4 * 8 * 9 + 4 * 4 * 8 * 8 + 10 * 32
    assert totals["macs_by_dtype"] == {"int8": totals["macs"]}


def test_a_tflite_file_without_its_extension_is_found_by_content(run, tmp_path):
    path = tmp_path / "model.bin"
    path.write_bytes(models.float_cnn())
    result = run(str(path), "--format", "json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["totals"]["params"] == 8 * 27 + 8 + 72 + 8 + 64 + 8 + 320 + 10


def test_latency_runs_the_imported_graph(run, cnn_file):
    result = run(cnn_file, "--latency")
    assert result.exit_code == 0, result.stderr
    assert "latency:" in result.stdout


def test_truncated_and_foreign_files_are_one_line(run, cnn_file, tmp_path):
    with open(cnn_file, "rb") as f:
        data = f.read()
    for cut in (len(data) // 4, len(data) // 2, len(data) - 64):
        path = tmp_path / f"cut{cut}.tflite"
        path.write_bytes(data[:cut])
        assert_bad_input(run(str(path)), str(path))
    other = tmp_path / "text.tflite"
    other.write_bytes(b"this is not a flatbuffer\n" * 8)
    assert_bad_input(run(str(other)), str(other), "TFL3")
