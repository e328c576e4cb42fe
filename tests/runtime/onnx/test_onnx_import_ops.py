"""Elementwise, activation, shape, indexing and reduction ONNX ops: one-node models imported by
flopcount give onnxruntime's outputs (values, shapes, dtypes), over attribute variants and
opset differences."""

from __future__ import annotations

import numpy as np
import pytest

from onnx_check import C, Case, compare, randn, rng

import flopcount.runtime as rt

F32 = np.float32
I64 = np.int64


def ints(*shape, low=-5, high=6, seed=0):
    return rng(seed).integers(low, high, shape).astype(I64)


def nonzero_ints(*shape, seed=1):
    v = ints(*shape, seed=seed)
    return np.where(v == 0, 3, v).astype(I64)


def positive(*shape, seed=0):
    return (np.abs(randn(*shape, seed=seed)) + 0.1).astype(F32)


def bools(*shape, seed=0):
    return rng(seed).random(shape) > 0.5


X = randn(2, 3, 4)
Y = randn(3, 1, seed=1)  # broadcasts against X

CASES = [
    # --- arithmetic, broadcasting ---
    Case("Add", [X, Y]), Case("Sub", [X, Y]), Case("Mul", [X, C(np.float32(2.5))]), Case("Div", [X, positive(4)]),
    Case("Div", [ints(3, 4), nonzero_ints(3, 4)]),  # integer division truncates toward zero
    Case("Pow", [positive(3, 4), randn(3, 4, seed=2)]), Case("Pow", [X, C(np.float32(2.0))]),
    Case("Mod", [ints(3, 4), nonzero_ints(3, 4)]),
    Case("Mod", [ints(3, 4), nonzero_ints(3, 4)], {"fmod": 1}),
    Case("Mod", [randn(3, 4) * 5, C(np.float32(1.5))], {"fmod": 1}),
    # --- comparisons and logic ---
    Case("Equal", [ints(3, 4), ints(3, 4, seed=2)]), Case("Less", [X, Y]), Case("LessOrEqual", [X, Y]),
    Case("Greater", [X, Y]), Case("GreaterOrEqual", [ints(3, 4), C(np.int64(0))]),
    Case("And", [bools(3, 4), bools(3, 4, seed=1)]), Case("Or", [bools(3, 4), bools(4, seed=1)]),
    Case("Xor", [bools(3, 4), bools(3, 4, seed=1)]), Case("Not", [bools(3, 4)]),
    Case("Where", [bools(3, 4), randn(3, 4), randn(4, seed=1)]),
    # --- unary math ---
    *[Case(op, [X]) for op in ("Neg", "Abs", "Sign", "Exp", "Sin", "Cos", "Tanh", "Erf", "Floor", "Ceil",
                                "Round", "Relu", "Sigmoid", "Softsign", "HardSwish", "Softplus")],
    Case("Mish", [X], opset=18),
    Case("Round", [np.array([0.5, 1.5, 2.5, -0.5, -1.5, 0.49], F32)]),  # half to even
    *[Case(op, [positive(3, 4)]) for op in ("Log", "Sqrt", "Reciprocal")],
    Case("Abs", [ints(3, 4)]), Case("Relu", [ints(3, 4).astype(np.int32)], opset=14),
    Case("IsNaN", [np.array([1.0, np.nan, -np.inf, 0.0], F32)]),
    *[Case("IsInf", [np.array([1.0, np.inf, -np.inf, np.nan], F32)], {"detect_negative": n, "detect_positive": p})
      for n, p in ((1, 1), (0, 1), (1, 0))],
    # --- activations with attributes ---
    Case("LeakyRelu", [X]), Case("LeakyRelu", [X], {"alpha": 0.2}),
    Case("Elu", [X]), Case("Elu", [X], {"alpha": 0.5}), Case("Celu", [X], {"alpha": 2.0}), Case("Selu", [X]),
    Case("Selu", [X], {"alpha": 1.5, "gamma": 2.0}),
    Case("HardSigmoid", [X * 4]), Case("HardSigmoid", [X * 4], {"alpha": 1 / 6, "beta": 0.5}),
    Case("ThresholdedRelu", [X], {"alpha": 0.5}), Case("Shrink", [X], {"lambd": 0.4, "bias": 0.1}),
    Case("Gelu", [X], opset=20), Case("Gelu", [X], {"approximate": "tanh"}, opset=20),
    Case("PRelu", [randn(2, 3, 4, 5), C(randn(3, 1, 1, seed=1))]),  # per channel
    Case("PRelu", [randn(2, 3, 4, 5), C(np.array([0.25], F32))]),  # one slope
    Case("PRelu", [randn(2, 3, 4, 5), C(randn(5, seed=1))]),  # along the last dim
    # --- casts, clip, variadic ---
    Case("Cast", [X * 3], {"to": 7}), Case("Cast", [ints(3, 4)], {"to": 1}), Case("Cast", [X], {"to": 9}),
    Case("Cast", [X], {"to": 10}, rtol=1e-3), Case("CastLike", [ints(3, 4), C(np.zeros(1, F32))]),
    Case("Clip", [X, C(np.float32(-0.5)), C(np.float32(0.5))]), Case("Clip", [X, None, C(np.float32(0.2))]),
    Case("Clip", [X]), Case("Clip", [ints(3, 4), C(np.int64(-1)), C(np.int64(2))]),
    Case("Clip", [X], {"min": -0.1, "max": 0.3}, opset=6),
    Case("Max", [X, Y, randn(4, seed=3)]), Case("Min", [X, Y]), Case("Sum", [X, Y, randn(4, seed=3)]),
    Case("Mean", [X, Y, randn(4, seed=3)]), Case("Max", [X]), Case("Sum", [X]), Case("Mean", [X]),
    *[Case(op, [randn(4, seed=3), randn(4, seed=4), X]) for op in ("Sum", "Max", "Min", "Mean")],  # small first
    Case("Sum", [randn(2, 3, seed=i) for i in range(40)]),
    # --- constants and shapes ---
    Case("Constant", [], {"value": np.arange(6, dtype=F32).reshape(2, 3)}),
    Case("Constant", [], {"value_float": 1.5}), Case("Constant", [], {"value_ints": [3, 1, 2]}),
    Case("Shape", [X]), Case("Shape", [X], {"start": 1}, opset=15), Case("Shape", [X], {"start": -2, "end": -1}, opset=15),
    Case("Size", [X]), Case("ConstantOfShape", [C(np.array([2, 3], I64))]),
    Case("ConstantOfShape", [C(np.array([3], I64))], {"value": np.array([7], I64)}),
    Case("Range", [C(np.int64(2)), C(np.int64(11)), C(np.int64(3))]),
    Case("Range", [C(np.float32(1.0)), C(np.float32(-2.0)), C(np.float32(-0.75))]),
    Case("Identity", [X]), Case("Dropout", [X]), Case("Dropout", [X], outputs=2),
    Case("Dropout", [X, C(np.float32(0.3)), C(np.array(False))], outputs=2),
    # --- views ---
    Case("Reshape", [X, C(np.array([0, -1], I64))]), Case("Reshape", [X, C(np.array([4, 0, -1], I64))]),
    Case("Reshape", [randn(2, 0, 3), C(np.array([3, 0], I64))], {"allowzero": 1}, opset=14),
    *[Case("Flatten", [X], {"axis": a}) for a in (0, 2, -1)],
    Case("Squeeze", [randn(1, 3, 1, 4)]), Case("Squeeze", [randn(1, 3, 1, 4), C(np.array([-2], I64))]),
    Case("Squeeze", [randn(1, 3, 1, 4)], {"axes": [0]}, opset=11),
    Case("Unsqueeze", [X, C(np.array([0, -1], I64))]), Case("Unsqueeze", [X], {"axes": [1, 3]}, opset=11),
    Case("Transpose", [X]), Case("Transpose", [X], {"perm": [1, 0, 2]}),
    Case("Expand", [Y, C(np.array([2, 1, 4], I64))]),  # both ways: (3, 1) and (2, 1, 4) -> (2, 3, 4)
    # --- copies ---
    Case("Concat", [X, randn(2, 2, 4, seed=1), randn(2, 1, 4, seed=2)], {"axis": -2}),
    Case("Split", [randn(2, 7), C(np.array([3, 4], I64))], {"axis": 1}, outputs=2),
    Case("Split", [randn(6, 2)], outputs=3), Case("Split", [randn(2, 7)], {"axis": 1, "num_outputs": 3}, opset=18, outputs=3),
    Case("Split", [randn(5, 2)], {"split": [2, 3]}, opset=11, outputs=2),
    Case("Slice", [randn(5, 6), C(np.array([1, -1], I64)), C(np.array([4, -7], I64)), C(np.array([0, 1], I64)),
                   C(np.array([2, -2], I64))]),
    Case("Slice", [randn(5, 6), C(np.array([2], I64)), C(np.array([np.iinfo(np.int64).max], I64))]),
    Case("Slice", [randn(5, 6), C(np.array([-100], I64)), C(np.array([100], I64)), C(np.array([-1], I64))]),
    Case("Slice", [randn(5, 6), C(np.array([4], I64)), C(np.array([np.iinfo(np.int64).min], I64)),
                   C(np.array([1], I64)), C(np.array([-1], I64))]),
    Case("Slice", [randn(5, 6)], {"starts": [1], "ends": [3], "axes": [1]}, opset=9),
    Case("Gather", [C(randn(10, 4)), ints(2, 3, low=0, high=10)]),  # an embedding lookup by run-time ids
    Case("Gather", [randn(10, 4), ints(2, 3, low=-10, high=10)]),  # negative run-time indices
    Case("Gather", [randn(10, 4), C(np.array([[1, -1], [0, 9]], I64))]),  # negative constant indices
    Case("Gather", [randn(3, 5, 2), C(np.array([4, 0, -2], I64))], {"axis": 1}),
    Case("Gather", [randn(3, 5, 2), C(np.int64(-1))], {"axis": 1}),  # one position: a view
    Case("Gather", [randn(3, 5, 2), ints(2, 2, low=0, high=5)], {"axis": 1}),
    Case("GatherElements", [randn(3, 4), ints(3, 2, low=-4, high=4)], {"axis": 1}),
    Case("GatherElements", [randn(3, 4), C(ints(2, 4, low=-3, high=3))]),
    Case("GatherND", [randn(3, 4, 2), ints(5, 2, low=0, high=3)]),
    Case("GatherND", [randn(3, 4, 2), C(np.array([[1], [3], [2]], I64))], {"batch_dims": 1}),
    Case("ScatterND", [randn(4, 3), C(np.array([[2], [0]], I64)), randn(2, 3, seed=1)]),
    Case("ScatterND", [randn(4, 3), ints(2, 2, low=0, high=3), randn(2, seed=1)]),
    Case("Tile", [randn(2, 3), C(np.array([2, 3], I64))]),
    Case("Pad", [randn(2, 3), C(np.array([1, 0, 2, 3], I64)), C(np.float32(1.5))]),
    Case("Pad", [randn(2, 5), C(np.array([0, -1, 0, 2], I64))]),  # negative: crop
    *[Case("Pad", [randn(2, 3, 5), C(np.array([0, 1, 2, 0, 2, 1], I64))], {"mode": m}, opset=19)
      for m in ("reflect", "edge", "wrap")],
    Case("Pad", [randn(2, 3, 5), C(np.array([1, 2], I64)), None, C(np.array([-1], I64))], opset=18),
    Case("Pad", [randn(2, 3)], {"pads": [1, 1, 0, 2], "value": 2.0}, opset=10),
    Case("Trilu", [randn(4, 5)]), Case("Trilu", [randn(2, 4, 5), C(np.int64(-1))], {"upper": 0}),
    Case("Trilu", [randn(4, 5), C(np.int64(2))]),
    *[Case("CumSum", [randn(3, 4), C(np.int64(a))], {"exclusive": e, "reverse": r})
      for a, e, r in ((1, 0, 0), (0, 1, 0), (-1, 0, 1), (1, 1, 1))],
    Case("CumSum", [ints(3, 4).astype(np.int32), C(np.int32(0))]),
    Case("DepthToSpace", [randn(1, 8, 2, 3)], {"blocksize": 2}),
    Case("DepthToSpace", [randn(1, 8, 2, 3)], {"blocksize": 2, "mode": "CRD"}),
    Case("SpaceToDepth", [randn(1, 2, 4, 6)], {"blocksize": 2}),
    Case("OneHot", [ints(2, 3, low=-4, high=4), C(np.int64(4)), C(np.array([0.0, 2.0], F32))]),
    Case("OneHot", [ints(3, low=0, high=3), C(np.int64(3)), C(np.array([-1, 5], I64))], {"axis": 0}),
    # --- reductions: axes as an attribute (opset 13) and as an input (18); ReduceSum's since 13 ---
    *[Case(op, [X], {"axes": [1], "keepdims": 0}, opset=13)
      for op in ("ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceSumSquare",
                 "ReduceLogSumExp")],
    Case("ReduceLogSum", [positive(2, 3, 4)], {"axes": [0, 2]}, opset=13),
    *[Case(op, [X, C(np.array([-1, 0], I64))], opset=18) for op in ("ReduceMean", "ReduceMax", "ReduceL2")],
    Case("ReduceSum", [X, C(np.array([1], I64))], {"keepdims": 0}), Case("ReduceSum", [X]),
    Case("ReduceSum", [ints(3, 4).astype(np.int32), C(np.array([0], I64))]),
    Case("ReduceSum", [X, C(np.zeros(0, I64))], {"noop_with_empty_axes": 1}),
    Case("ReduceMean", [X], opset=18),
    Case("ReduceMax", [bools(3, 4), C(np.array([1], I64))], opset=20),
    *[Case(op, [np.array([[1, 3, 3, 0], [2, 2, 1, 2]], F32)], {"axis": 1, "keepdims": k, "select_last_index": s})
      for op in ("ArgMax", "ArgMin") for k in (0, 1) for s in (0, 1)],
    # --- QDQ quantization: per tensor (uint8 by default, int8 by its zero point), per channel ---
    Case("QuantizeLinear", [X * 40, C(np.float32(0.5))]),
    Case("QuantizeLinear", [X * 40, C(np.float32(0.25)), C(np.int8(3))]),
    Case("QuantizeLinear", [X, C(np.array([0.01, 0.02, 0.05], F32)), C(np.array([0, 1, -2], np.int8))], {"axis": 1}),
    Case("DequantizeLinear", [np.array([[0, 3, 255], [7, 128, 9]], np.uint8), C(np.float32(0.5)), C(np.uint8(128))]),
    Case("DequantizeLinear", [rng(3).integers(-128, 128, (4, 3, 2)).astype(np.int8),
                              C(np.array([0.1, 0.2, 0.3], F32)), C(np.array([1, 0, -1], np.int8))], {"axis": 1}),
    *[Case("TopK", [np.array([[1, 3, 3, 0], [2, 2, 1, 2]], F32), C(np.array([2], I64))], {"axis": a, "largest": big},
           outputs=2) for a in (1, -2) for big in (0, 1)],
]


@pytest.mark.parametrize("case", CASES, ids=[f"{i}-{c.op_type}" for i, c in enumerate(CASES)])
def test_one_node_model_matches_onnxruntime(case):
    compare(case)


def test_every_converter_is_exercised():
    # the layer ops are in test_onnx_import_layers.py, the newer families and control flow in
    # test_onnx_import_families.py and test_onnx_control_flow.py, quantization in
    # test_onnx_quantized.py, com.microsoft in test_onnx_microsoft.py; an op that ONNX's own node
    # tests cover passes in them (test_onnx_conformance.py runs them all) and needs no case here
    from test_onnx_conformance import exercised_ops
    from test_onnx_control_flow import CONTROL_FLOW_OPS
    from test_onnx_import_families import FAMILY_OPS
    from test_onnx_import_layers import LAYER_OPS
    from test_onnx_microsoft import MICROSOFT_OPS
    from test_onnx_quantized import QUANTIZED_OPS

    from flopcount.runtime.onnx.converters import CONVERTERS

    covered = ({c.op_type for c in CASES} | LAYER_OPS | FAMILY_OPS | CONTROL_FLOW_OPS | QUANTIZED_OPS | MICROSOFT_OPS
               | exercised_ops())
    missing = sorted(set(rt.onnx.supported_ops()) - covered)
    where = [f"{op} (converter in {CONVERTERS[op].__module__.replace('.', '/')}.py)" for op in missing]
    assert not missing, (f"converters that neither ONNX's node tests nor a Case exercise: {where}; add a Case "
                         f"to tests/runtime/onnx/test_onnx_import_ops.py (a layer op: test_onnx_import_layers.py)")


def test_shape_arithmetic_folds_to_constants():
    # TorchScript's view(batch, -1): Shape -> Gather -> Unsqueeze -> Concat -> Reshape
    from onnx import helper, TensorProto

    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
        helper.make_node("Unsqueeze", ["n", "axes"], ["n1"]),
        helper.make_node("Concat", ["n1", "minus_one"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["flat"]),
        helper.make_node("Mul", ["flat", "flat"], ["y"]),
    ]
    inits = [helper.make_tensor("zero", TensorProto.INT64, [], [0]),
             helper.make_tensor("axes", TensorProto.INT64, [1], [0]),
             helper.make_tensor("minus_one", TensorProto.INT64, [1], [-1])]
    graph = helper.make_graph(nodes, "fold", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 12])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    g = rt.onnx.load(model, input_shapes={"x": (5, 3, 4)})
    assert [n.op_name for n in g.nodes] == ["reshape", "mul"]
    assert g.nodes[0].attrs["shape"] == (5, 12)
    assert not g.constants  # the folded pieces are gone
    x = randn(5, 3, 4)
    np.testing.assert_allclose(rt.GraphModule(g)(rt.tensor(x)).numpy(), (x * x).reshape(5, 12), rtol=1e-6)


def test_ops_map_to_the_runtime_ops_counters_know():
    # rows of a weight table by run-time ids: an embedding; of another tensor: an indexing gather
    assert [n.op_name for n in compare(Case("Gather", [C(randn(10, 4)), ints(2, 3, low=0, high=10)])).nodes] == ["embedding"]
    assert [n.op_name for n in compare(Case("Gather", [randn(10, 4), ints(2, 3, low=-10, high=10)])).nodes] == ["index"]
    assert [n.op_name for n in compare(Case("Gather", [randn(3, 5), C(np.int64(2))], {"axis": 1})).nodes] == ["getitem"]
    assert [n.op_name for n in compare(Case("Div", [ints(3, 4), nonzero_ints(3, 4)])).nodes] != ["div"]
    # integer initializers are shape data: constants, not parameters
    g = compare(Case("Reshape", [X, C(np.array([0, -1], I64))]))
    assert not g.parameters and [n.op_name for n in g.nodes] == ["reshape"]
