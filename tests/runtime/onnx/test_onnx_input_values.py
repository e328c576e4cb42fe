"""Graph inputs that carry shapes (a Reshape target, TopK's k): the tensors given bind them when
the model runs; on meta they come from the values bound (``input_values=`` / ``--input-value``),
or one error line names the input whose values are needed."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from onnx_check import assert_same, run_ort

import flopcount
import flopcount.runtime as rt

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _model():
    """x (4, 6) reshaped to ``shape``, then the ``k`` largest of each row: both are inputs."""
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["r"], name="reshape"),
             helper.make_node("TopK", ["r", "k"], ["y", "i"], name="top", axis=-1)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 6]),
                                           helper.make_tensor_value_info("shape", TensorProto.INT64, [2]),
                                           helper.make_tensor_value_info("k", TensorProto.INT64, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
                               helper.make_tensor_value_info("i", TensorProto.INT64, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.fixture
def path(tmp_path):
    p = str(tmp_path / "shapes.onnx")
    onnx.save(_model(), p)
    return p


def test_runs_with_the_values_given(path):
    x = np.random.default_rng(0).standard_normal((4, 6)).astype(np.float32)
    feeds = {"x": x, "shape": np.array([8, 3], np.int64), "k": np.array([2], np.int64)}
    report = flopcount.profile(path, *[rt.tensor(a) for a in feeds.values()], latency=True, repeat=1, warmup=0)
    assert report.input_shapes == [(4, 6)]                  # shape and k became part of the graph
    graph = rt.onnx.load(path, input_values=feeds)
    assert_same(list(rt.GraphModule(graph)(rt.tensor(x))), run_ort(_model(), feeds))
    assert [r.output_shapes for r in report.ops if r.op == "topk"] == [((8, 2), (8, 2))]


def test_counted_on_meta_from_bound_values_or_refused_naming_them(path):
    report = flopcount.profile(path, device="meta", input_values={"shape": [2, 12], "k": [5]})
    topk = next(r for r in report.ops if r.op == "topk")
    assert topk.output_shapes == ((2, 5), (2, 5)) and topk.flops == 24 * (3 + 1)
    with pytest.raises(rt.ShapeError, match=r"shapes.onnx: ONNX Reshape node 'reshape': input 'shape' is computed "
                                            r"from the values of graph input\(s\) 'shape'; give their values: "
                                            r"input_values=\{'shape': \.\.\.\}$"):
        flopcount.profile(path, device="meta")


def test_command_line(path):
    def run(*args):
        return subprocess.run([sys.executable, "-m", "flopcount", path, *args, "--format", "json"], cwd=ROOT,
                              capture_output=True, text=True, timeout=120)

    counted = run("--input-value", "shape=3,8", "--input-value", "k=4")
    assert counted.returncode == 0, counted.stderr
    assert '"topk"' in counted.stdout
    refused = run("--input-value", "shape=3,8")
    assert refused.returncode == 2 and refused.stderr.strip().endswith("give their values: --input-value k=...")
    bad = run("--input-value", "k=four")
    assert bad.returncode == 2 and "the values must be numbers" in bad.stderr
