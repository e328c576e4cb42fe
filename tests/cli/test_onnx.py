"""ONNX files on the command line: symbolic dims bound from --input-shape / --batch, bad files,
unsupported ops listed in one line."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from conftest import assert_bad_input

onnx = pytest.importorskip("onnx")
pytest.importorskip("flopcount.runtime.onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


def _save(tmp_path, name, nodes, inputs, initializers=(), output_dims=("batch", 3)) -> str:
    output = helper.make_tensor_value_info("y", TensorProto.FLOAT, list(output_dims))
    graph = helper.make_graph(nodes, name, inputs, [output], initializer=list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path / f"{name}.onnx"
    onnx.save(model, str(path))
    return str(path)


@pytest.fixture
def mlp_onnx(tmp_path) -> str:
    """x [batch, 4] @ W (4, 3), then Relu: batch·4·3 MACs."""
    w = numpy_helper.from_array(np.ones((4, 3), np.float32), "W")
    nodes = [helper.make_node("MatMul", ["x", "W"], ["h"], name="/fc/MatMul"),
             helper.make_node("Relu", ["h"], ["y"], name="/act/Relu")]
    return _save(tmp_path, "mlp", nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])], [w])


def _macs(result) -> int:
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)["totals"]["macs"]


def test_symbolic_dims_bound_by_name_position_or_batch(run, mlp_onnx):
    assert _macs(run(mlp_onnx, "-i", "x=2x4", "--format", "json")) == 2 * 4 * 3
    assert _macs(run(mlp_onnx, "-i", "5,4", "--format", "json")) == 5 * 4 * 3
    assert _macs(run(mlp_onnx, "--batch", 7, "--format", "json")) == 7 * 4 * 3
    doc = json.loads(run(mlp_onnx, "--batch", 2, "--format", "json").stdout)
    assert doc["model"] == "mlp.onnx" and doc["input_shapes"] == [[2, 4]]


def test_unbound_or_wrong_dims_name_the_input(run, mlp_onnx):
    assert_bad_input(run(mlp_onnx), "'x'", "batch", "x [batch, 4]", "-i x=1x4")
    assert_bad_input(run(mlp_onnx, "-i", "x=2x5"), "'x'")
    assert_bad_input(run(mlp_onnx, "-i", "tokens=2x4"), "tokens")


def test_every_unsupported_op_is_listed(run, tmp_path):
    nodes = [helper.make_node("FooOp", ["x"], ["a"], name="foo1"),
             helper.make_node("Relu", ["a"], ["b"]),
             helper.make_node("BarOp", ["b"], ["c"], name="bar1"),
             helper.make_node("FooOp", ["c"], ["y"], name="foo2")]
    path = _save(tmp_path, "odd", nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                 output_dims=(1, 4))
    assert_bad_input(run(path), "FooOp", "BarOp", "foo1", "foo2")


def test_not_onnx_truncated_and_empty_files(run, mlp_onnx, tmp_path):
    data = open(mlp_onnx, "rb").read()
    for name, payload in [("half.onnx", data[: len(data) // 2]), ("empty.onnx", b""),
                          ("text.onnx", b"not a model\n" * 20)]:
        path = tmp_path / name
        path.write_bytes(payload)
        assert_bad_input(run(path, "-i", "x=1x4"), str(path))


BERT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "onnx",
                    "bert_torchscript_op17.onnx")


def test_a_pytorch_export_with_batch_and_sequence_axes(run):
    import flopcount
    import flopcount.runtime as rt

    expected = flopcount.profile(rt.onnx.load(BERT, input_shapes={"input_ids": (1, 32)})).macs
    assert _macs(run(BERT, "-i", "input_ids=1x32", "--format", "json")) == expected
    assert _macs(run(BERT, "-i", "1x32", "--batch", 3, "--format", "json")) == 3 * expected
    assert_bad_input(run(BERT), "'input_ids' has symbolic dims ['batch', 'sequence']",
                     "input_ids [batch, sequence]", "-i input_ids=1x1")
    assert_bad_input(run(BERT, "--batch", 2), "symbolic dims", "input_ids [batch, sequence]")
