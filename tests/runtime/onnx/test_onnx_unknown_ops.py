"""A node no converter knows does not stop the count: it keeps the shapes the file (or shape
inference) gives, counts as zero, is listed as unsupported with its node names; only running it
fails, naming the op. ``strict`` refuses such a file at once."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import flopcount
import flopcount.runtime as rt

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

F = TensorProto.FLOAT
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _model(with_value_info: bool = True):
    """x (2, 8) -> Relu -> com.example.Mystery (2, 8 -> 2, 6) -> MatMul w (6, 3) -> y."""
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="relu"),
             helper.make_node("Mystery", ["a"], ["b"], name="mystery_1", domain="com.example"),
             helper.make_node("MatMul", ["b", "w"], ["y"], name="head")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F, ["batch", 8])],
                              [helper.make_tensor_value_info("y", F, ["batch", 3])],
                              [onnx.numpy_helper.from_array(np.ones((6, 3), np.float32), "w")])
    if with_value_info:
        graph.value_info.append(helper.make_tensor_value_info("b", F, ["batch", 6]))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)],
                             ir_version=8)


def test_the_rest_of_the_file_is_counted(tmp_path):
    path = str(tmp_path / "mystery.onnx")
    onnx.save(_model(), path)
    report = flopcount.profile(path, input_shape={"x": (2, 8)})
    assert report.macs == 2 * 6 * 3                     # the MatMul after it, at the shape the file states
    assert [str(u) for u in report.unsupported] == ["op ONNX com.example.Mystery (1 call: 'mystery_1')"]
    with pytest.raises(rt.UnsupportedOpError, match=r"ONNX com.example.Mystery node 'mystery_1' cannot run"):
        flopcount.profile(path, input_shape={"x": (2, 8)}, latency=True)
    with pytest.raises(rt.UnsupportedOpError, match=r"no rule in the flopcount convention for: op ONNX "
                                                    r"com.example.Mystery \(1 call: 'mystery_1'\)"):
        flopcount.profile(path, input_shape={"x": (2, 8)}, strict=True)


def test_strict_load_refuses_at_once():
    with pytest.raises(rt.UnsupportedOpError, match=r"1 ONNX op type\(s\) with no converter: com.example.Mystery "
                                                    r"\(1 node: 'mystery_1'\)"):
        rt.onnx.load(_model(), input_shapes={"x": (2, 8)}, strict=True)


def test_shapes_from_shape_inference_for_a_standard_op():
    # TfIdfVectorizer has no converter; ONNX's shape inference knows its output shape
    node = helper.make_node("TfIdfVectorizer", ["ids"], ["counts"], name="tfidf", mode="TF", min_gram_length=1,
                            max_gram_length=1, max_skip_count=0, ngram_counts=[0], ngram_indexes=[0, 1, 2],
                            pool_int64s=[4, 5, 6])
    graph = helper.make_graph([node, helper.make_node("Relu", ["counts"], ["y"])], "g",
                              [helper.make_tensor_value_info("ids", TensorProto.INT64, [2, 7])],
                              [helper.make_tensor_value_info("y", F, None)])
    g = rt.onnx.load(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8))
    assert [n.op_name for n in g.nodes] == ["opaque", "relu"] and g.outputs[0].shape == (2, 3)


def test_an_unknown_op_without_stated_shapes_is_refused_by_name():
    with pytest.raises(rt.UnsupportedOpError, match=r"with no converter: com.example.Mystery \(1 node: .mystery_1.\); "
                                                    r"ONNX com.example.Mystery node .mystery_1. has no converter, "
                                                    r"and neither the file nor shape inference gives the shape of "
                                                    r"its output 'b'"):
        rt.onnx.load(_model(with_value_info=False), input_shapes={"x": (2, 8)})


def test_command_line_counts_lists_and_refuses_with_strict_or_latency(tmp_path):
    path = str(tmp_path / "mystery.onnx")
    onnx.save(_model(), path)

    def run(*args):
        return subprocess.run([sys.executable, "-m", "flopcount", path, "-i", "x=2x8", *args], cwd=ROOT,
                              capture_output=True, text=True, timeout=120)

    counted = run("--format", "json")
    assert counted.returncode == 0, counted.stderr
    assert '"nodes": [\n        "mystery_1"' in counted.stdout or '"mystery_1"' in counted.stdout
    for flag in ("--strict", "--latency"):
        refused = run(flag)
        assert refused.returncode == 2 and "ONNX com.example.Mystery" in refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1 and "Traceback" not in refused.stderr
