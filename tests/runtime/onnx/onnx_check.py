"""One-node ONNX models run in flopcount and in onnxruntime (the independent engine).

    compare(Case("Conv", [x, C(w)], {"pads": [1, 1, 1, 1]}))

A ``Case`` lists the node's inputs in order: a numpy array is a graph input (fed to both
engines), ``C(array)`` an initializer, ``None`` an omitted optional input. ``compare`` builds
the model with onnx.helper, imports it with ``rt.onnx.load`` and checks every output against
onnxruntime's (values, shapes and dtypes).
"""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import helper, numpy_helper  # noqa: E402

import flopcount.runtime as rt  # noqa: E402


class C:
    """An initializer operand of a Case."""

    def __init__(self, array):
        self.array = np.asarray(array)


class Case:
    def __init__(self, op_type: str, args: list, attrs: dict | None = None, opset: int = 17,
                 outputs: int = 1, rtol: float = 1e-4, atol: float = 1e-5):
        self.op_type, self.args, self.attrs = op_type, args, attrs or {}
        self.opset, self.outputs, self.rtol, self.atol = opset, outputs, rtol, atol

    def __repr__(self) -> str:
        return f"{self.op_type}(opset {self.opset}, {self.attrs})"


def rng(seed: int = 0):
    return np.random.default_rng(seed)


def randn(*shape, seed: int = 0, dtype=np.float32):
    return rng(seed).standard_normal(shape).astype(dtype)


def model_of(case: Case):
    """The one-node ModelProto of ``case`` (shapes of the outputs inferred by onnx)."""
    inputs, names, inits = [], [], []
    for i, arg in enumerate(case.args):
        if arg is None:
            names.append("")
        elif isinstance(arg, C):
            name = f"c{i}"
            inits.append(numpy_helper.from_array(arg.array, name))
            names.append(name)
        else:
            name = f"x{i}"
            elem = helper.np_dtype_to_tensor_dtype(arg.dtype)
            inputs.append(helper.make_tensor_value_info(name, elem, list(arg.shape)))
            names.append(name)
    while names and names[-1] == "":
        names.pop()
    outs = [f"y{i}" for i in range(case.outputs)]
    attrs = {k: numpy_helper.from_array(v) if isinstance(v, np.ndarray) else v for k, v in case.attrs.items()}
    node = helper.make_node(case.op_type, names, outs, name=f"/block/{case.op_type}", **attrs)
    graph = helper.make_graph([node], "case", inputs, [helper.make_value_info(o, onnx.TypeProto()) for o in outs],
                              inits)
    opsets = [helper.make_opsetid("", case.opset)]
    model = helper.make_model(graph, opset_imports=opsets, ir_version=helper.find_min_ir_version_for(opsets))
    model = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    for out in model.graph.output:
        if not out.type.HasField("tensor_type") and inputs:  # inference skips some function ops
            out.type.CopyFrom(inputs[0].type)  # (GroupNormalization-18): they keep the input's type
    return model


def feeds_of(case: Case) -> dict:
    return {f"x{i}": a for i, a in enumerate(case.args) if isinstance(a, np.ndarray)}


def run_ort(model, feeds: dict) -> list:
    """onnxruntime's outputs for a ModelProto or a file path."""
    source = model if isinstance(model, str) else model.SerializeToString()
    session = ort.InferenceSession(source, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def run_flopcount(model, feeds: dict, input_shapes=None):
    graph = rt.onnx.load(model, input_shapes=input_shapes)
    out = rt.GraphModule(graph)(*[rt.tensor(a) for a in feeds.values()])
    return graph, list(out) if isinstance(out, tuple) else [out]


def assert_same(ours: list, theirs: list, rtol: float = 1e-4, atol: float = 1e-5, what: str = "") -> None:
    assert len(ours) == len(theirs), f"{what}: {len(ours)} outputs, onnxruntime gives {len(theirs)}"
    for i, (o, t) in enumerate(zip(ours, theirs)):
        got = o.numpy()
        assert got.shape == t.shape, f"{what} output {i}: shape {got.shape}, onnxruntime {t.shape}"
        assert got.dtype == t.dtype, f"{what} output {i}: dtype {got.dtype}, onnxruntime {t.dtype}"
        np.testing.assert_allclose(got, t, rtol=rtol, atol=atol, err_msg=f"{what} output {i}")


def compare(case: Case):
    """Run ``case`` in both engines and check the outputs agree; returns the imported graph."""
    model = model_of(case)
    feeds = feeds_of(case)
    graph, ours = run_flopcount(model, feeds)
    assert_same(ours, run_ort(model, feeds), case.rtol, case.atol, repr(case))
    return graph
