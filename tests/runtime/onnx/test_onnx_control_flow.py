"""If, Loop and Scan: unrolled at import, each iteration in a scope of its own, the trip count in
the graph's notes; outputs against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest

from onnx_check import assert_same, randn, run_ort

import flopcount
import flopcount.runtime as rt

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

CONTROL_FLOW_OPS = {"If", "Loop", "Scan"}
F = TensorProto.FLOAT


def _model(nodes, inputs, outputs, initializers=(), opset=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def _loop_model(trip_count_input: bool = False):
    """y = x; for i in range(3): y = y @ w + i; also every step's y (a scan output)."""
    body = helper.make_graph(
        [helper.make_node("MatMul", ["y_in", "w"], ["mm"]),
         helper.make_node("Cast", ["i"], ["i_f"], to=F),
         helper.make_node("Add", ["mm", "i_f"], ["y_out"]),
         helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Identity", ["y_out"], ["scan_out"])],
        "body", [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                 helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
                 helper.make_tensor_value_info("y_in", F, [2, 4])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("y_out", F, [2, 4]), helper.make_tensor_value_info("scan_out", F, [2, 4])])
    inputs = [helper.make_tensor_value_info("x", F, [2, 4])]
    inits = [onnx.numpy_helper.from_array(randn(4, 4, seed=1) * 0.5, "w"),
             onnx.numpy_helper.from_array(np.array(True), "cond")]
    if trip_count_input:
        inputs.append(helper.make_tensor_value_info("n", TensorProto.INT64, []))
    else:
        inits.append(onnx.numpy_helper.from_array(np.array(3, np.int64), "n"))
    loop = helper.make_node("Loop", ["n", "cond", "x"], ["y", "steps"], name="loop", body=body)
    return _model([loop], inputs, [helper.make_tensor_value_info("y", F, [2, 4]),
                                   helper.make_tensor_value_info("steps", F, [3, 2, 4])], inits)


def test_loop_unrolls_each_iteration_in_its_own_scope():
    model = _loop_model()
    x = randn(2, 4)
    graph = rt.onnx.load(model)
    assert_same(list(rt.GraphModule(graph)(rt.tensor(x))), run_ort(model, {"x": x}))
    matmuls = [n.scope for n in graph.nodes if n.op_name == "matmul"]
    assert matmuls == ["loop.0", "loop.1", "loop.2"]
    assert graph.notes == ["Loop node 'loop': 3 iterations counted"]
    assert graph.cost().macs == 3 * 2 * 4 * 4


def test_a_trip_count_from_an_input_is_bound_by_value_or_named():
    model = _loop_model(trip_count_input=True)
    with pytest.raises(rt.ShapeError, match=r"Loop node 'loop': input 'M' \(the trip count\) is computed from the "
                                            r"values of graph input\(s\) 'n'"):
        rt.onnx.load(model)
    x = randn(2, 4)
    graph = rt.onnx.load(model, input_values={"n": np.array(3)})
    assert [v.name for v in graph.inputs] == ["x"]
    assert_same(list(rt.GraphModule(graph)(rt.tensor(x))), run_ort(model, {"x": x, "n": np.array(3, np.int64)}))


def test_profile_reports_every_iteration_and_the_trip_count(tmp_path):
    path = str(tmp_path / "loop.onnx")
    onnx.save(_loop_model(), path)
    report = flopcount.profile(path)
    rows = {row.name: row for row in report.rows}
    assert rows["loop.2"].macs == 2 * 4 * 4 and report.macs == 3 * 2 * 4 * 4


def test_a_condition_that_depends_on_the_data_is_refused():
    body = helper.make_graph(
        [helper.make_node("Mul", ["y_in", "two"], ["y_out"]),
         helper.make_node("ReduceSum", ["y_out"], ["total"], keepdims=0),
         helper.make_node("Less", ["total", "limit"], ["cond_out"])],
        "body", [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                 helper.make_tensor_value_info("c", TensorProto.BOOL, []),
                 helper.make_tensor_value_info("y_in", F, [3])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []), helper.make_tensor_value_info("y_out", F, [3])],
        [onnx.numpy_helper.from_array(np.float32(2), "two"), onnx.numpy_helper.from_array(np.float32(100), "limit")])
    loop = helper.make_node("Loop", ["", "go", "x"], ["y"], name="doubling", body=body)
    model = _model([loop], [helper.make_tensor_value_info("x", F, [3])], [helper.make_tensor_value_info("y", F, [3])],
                   [onnx.numpy_helper.from_array(np.array(True), "go")])
    with pytest.raises(rt.UnsupportedOpError, match="Loop node 'doubling': the loop's condition depends on the data"):
        rt.onnx.load(model)


def _if_model(cond_input: bool):
    then = helper.make_graph([helper.make_node("Relu", ["x"], ["t"])], "then", [],
                             [helper.make_tensor_value_info("t", F, [3, 4])])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [],
                              [helper.make_tensor_value_info("e", F, [3, 4])])
    inputs = [helper.make_tensor_value_info("x", F, [3, 4])]
    nodes = [helper.make_node("If", ["c"], ["y"], name="branch", then_branch=then, else_branch=other)]
    inits = []
    if cond_input:
        nodes.insert(0, helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0))
        nodes.insert(1, helper.make_node("Greater", ["s", "zero"], ["c"]))
        inits.append(onnx.numpy_helper.from_array(np.float32(0), "zero"))
    else:
        inits.append(onnx.numpy_helper.from_array(np.array(False), "c"))
    return _model(nodes, inputs, [helper.make_tensor_value_info("y", F, [3, 4])], inits)


def test_if_with_a_known_condition_converts_the_branch_taken():
    model = _if_model(cond_input=False)
    graph = rt.onnx.load(model)
    assert [n.op_name for n in graph.nodes] == ["neg"] and graph.nodes[0].scope == "branch.else"
    x = randn(3, 4)
    assert_same([rt.GraphModule(graph)(rt.tensor(x))], run_ort(model, {"x": x}))


@pytest.mark.parametrize("sign", [1, -1])
def test_if_on_the_data_counts_both_branches_and_selects(sign):
    model = _if_model(cond_input=True)
    graph = rt.onnx.load(model)
    assert {"relu", "neg", "where"} <= {n.op_name for n in graph.nodes}
    assert graph.notes == ["If node 'branch': the condition depends on the data; both branches are counted"]
    x = np.abs(randn(3, 4)) * sign
    assert_same([rt.GraphModule(graph)(rt.tensor(x))], run_ort(model, {"x": x}))


def _scan_model(opset: int, reverse: bool = False):
    body = helper.make_graph(
        [helper.make_node("Add", ["sum_in", "row"], ["sum_out"]), helper.make_node("Mul", ["sum_out", "row"], ["out"])],
        "body", [helper.make_tensor_value_info("sum_in", F, [4]), helper.make_tensor_value_info("row", F, [4])],
        [helper.make_tensor_value_info("sum_out", F, [4]), helper.make_tensor_value_info("out", F, [4])])
    attrs = {"num_scan_inputs": 1, "body": body}
    if opset >= 9:
        attrs["scan_input_directions"] = [int(reverse)]
        attrs["scan_output_axes"] = [1]
        node = helper.make_node("Scan", ["init", "xs"], ["total", "ys"], name="scan", **attrs)
        inputs = [helper.make_tensor_value_info("init", F, [4]), helper.make_tensor_value_info("xs", F, [5, 4])]
        outputs = [helper.make_tensor_value_info("total", F, [4]), helper.make_tensor_value_info("ys", F, [4, 5])]
    else:  # Scan-8: a batch dim first, sequence_lens omitted
        node = helper.make_node("Scan", ["", "init", "xs"], ["total", "ys"], name="scan", **attrs)
        inputs = [helper.make_tensor_value_info("init", F, [2, 4]), helper.make_tensor_value_info("xs", F, [2, 5, 4])]
        outputs = [helper.make_tensor_value_info("total", F, [2, 4]), helper.make_tensor_value_info("ys", F, [2, 5, 4])]
    return _model([node], inputs, outputs, opset=opset)


@pytest.mark.parametrize("opset,reverse", [(9, False), (16, True), (8, False)])
def test_scan_iterates_over_its_inputs(opset, reverse):
    model = _scan_model(opset, reverse)
    shapes = [tuple(d.dim_value for d in v.type.tensor_type.shape.dim) for v in model.graph.input]
    feeds = {v.name: randn(*shape, seed=i) for i, (v, shape) in enumerate(zip(model.graph.input, shapes))}
    graph = rt.onnx.load(model)
    assert_same(list(rt.GraphModule(graph)(*[rt.tensor(a) for a in feeds.values()])), run_ort(model, feeds))
    steps = 5 * (2 if opset == 8 else 1)
    assert sum(n.op_name == "add" for n in graph.nodes) == steps
