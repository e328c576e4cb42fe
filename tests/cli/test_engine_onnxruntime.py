"""--engine onnxruntime and --threads on the command line (the engine itself:
tests/engines/test_onnxruntime_engine.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("onnxruntime")

from click.testing import CliRunner  # noqa: E402

from flopcount.cli import main  # noqa: E402

CNN = str(Path(__file__).parents[1] / "data" / "onnx" / "cnn_torchscript_op13.onnx")


def test_the_command_line():
    runner = CliRunner()
    result = runner.invoke(main, [CNN, "-i", "1x3x32x32", "--engine", "onnxruntime", "--threads", "1",
                                  "--repeat", "2", "--format", "json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["engine"] == "onnxruntime" and doc["engine_nodes"]
    refused = runner.invoke(main, [CNN, "-i", "1x3x32x32", "--threads", "2"])
    assert refused.exit_code == 2 and "--threads" in refused.output
