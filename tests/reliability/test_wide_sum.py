"""A Sum node with many inputs is one op, one row and one output: a Sum of 100,000 inputs took
89 s (99,999 add rows, the table most of it). Its FLOPs stay those of the binary chain, n − 1
per output element, and its values are onnxruntime's."""

from __future__ import annotations

import numpy as np
import pytest

import flopcount

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402

N = 10_000


def _wide(op: str, path: str) -> str:
    """One ``op`` node over the graph input ``x`` [1, 16], N times, and a bias [16]."""
    bias = helper.make_tensor("b", TensorProto.FLOAT, [16], np.linspace(-1, 1, 16, dtype=np.float32))
    node = helper.make_node(op, ["x"] * (N - 1) + ["b"], ["y"], name="wide")
    graph = helper.make_graph([node], "wide", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16])], initializer=[bias])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


@pytest.mark.parametrize("op, name, extra", [("Sum", "add_n", 0), ("Max", "maximum_n", 0),
                                             ("Min", "minimum_n", 0), ("Mean", "mean_n", 16)])
def test_a_node_of_ten_thousand_inputs_is_one_row_with_the_chains_flops(tmp_path, op, name, extra):
    path = _wide(op, str(tmp_path / f"{op}.onnx"))
    report = flopcount.profile(path)
    assert [r.type for r in report.rows if r.kind == "op"] == [name]     # one node: one row
    assert report.flops == (N - 1) * 16 + extra     # Mean: one division per output element
    assert report.macs == 0


@pytest.mark.parametrize("op", ["Sum", "Max", "Min", "Mean"])
def test_its_values_are_onnxruntimes(tmp_path, op):
    import flopcount.runtime as rt

    path = _wide(op, str(tmp_path / f"{op}.onnx"))
    x = np.random.default_rng(0).standard_normal((1, 16)).astype(np.float32)
    theirs = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    ours = rt.GraphModule(rt.onnx.load(path))(rt.tensor(x))
    np.testing.assert_allclose(ours.numpy(), theirs, rtol=1e-4, atol=1e-4)
