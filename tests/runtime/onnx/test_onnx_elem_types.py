"""ONNX element types beyond numpy's own: bfloat16, the four float8 types, float4e2m1 and
float8e8m0, int4/uint4 and int2/uint2 (packed two and four to a byte in the file) and uint16..64, read from files, cast to and from (float8 saturation),
and written by the exporter. onnxruntime is the independent engine; its Python API cannot feed
or fetch these types, so each model casts them from or to float32 inside the graph."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from onnx_check import run_ort

import flopcount.runtime as rt

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

NEW_TYPES = {
    TensorProto.BFLOAT16: ml_dtypes.bfloat16, TensorProto.FLOAT8E4M3FN: ml_dtypes.float8_e4m3fn,
    TensorProto.FLOAT8E4M3FNUZ: ml_dtypes.float8_e4m3fnuz, TensorProto.FLOAT8E5M2: ml_dtypes.float8_e5m2,
    TensorProto.FLOAT8E5M2FNUZ: ml_dtypes.float8_e5m2fnuz, TensorProto.INT4: ml_dtypes.int4,
    TensorProto.UINT4: ml_dtypes.uint4, TensorProto.UINT16: np.uint16, TensorProto.UINT32: np.uint32,
    TensorProto.UINT64: np.uint64, TensorProto.FLOAT4E2M1: ml_dtypes.float4_e2m1fn,
    TensorProto.FLOAT8E8M0: ml_dtypes.float8_e8m0fnu, TensorProto.INT2: ml_dtypes.int2,
    TensorProto.UINT2: ml_dtypes.uint2,
}
# onnxruntime runs none of these yet; ONNX defines them from opset 23 (float4), 24 (float8e8m0)
# and 25 (int2): their files are checked against the values themselves here, and against
# ONNX's reference outputs in the conformance suite (Cast, CastLike, QuantizeLinear tests)
NEWEST = {TensorProto.FLOAT4E2M1: 23, TensorProto.FLOAT8E8M0: 24, TensorProto.INT2: 25, TensorProto.UINT2: 25}


def _model(nodes, inputs, outputs, inits=(), opset=21):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)


def _values(np_type, count: int, seed: int = 0) -> np.ndarray:
    """``count`` values that ``np_type`` holds exactly (small integers for the integer types)."""
    rng = np.random.default_rng(seed)
    if np_type in (ml_dtypes.int4,):
        return rng.integers(-8, 8, count).astype(np_type)
    if np_type in (ml_dtypes.int2,):
        return rng.integers(-2, 2, count).astype(np_type)
    if np_type in (ml_dtypes.uint2,):
        return rng.integers(0, 4, count).astype(np_type)
    if np_type in (ml_dtypes.float8_e8m0fnu,):  # powers of two
        return (2.0 ** rng.integers(-20, 20, count)).astype(np_type)
    if np.dtype(np_type).kind == "u" or np_type is ml_dtypes.uint4:
        return rng.integers(0, 16, count).astype(np_type)
    return (rng.standard_normal(count) * 4).astype(np_type)


@pytest.mark.parametrize("code", list(NEW_TYPES), ids=[TensorProto.DataType.Name(c) for c in NEW_TYPES])
@pytest.mark.parametrize("count", [7, 5001])  # odd: the last byte of a 4- or 2-bit tensor is partly used
def test_an_initializer_of_each_type_is_read_from_the_file(tmp_path, code, count):
    values = _values(NEW_TYPES[code], count)
    model = _model([helper.make_node("Cast", ["w"], ["y"], to=TensorProto.FLOAT)], [],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [count])],
                   [numpy_helper.from_array(values, "w")], opset=NEWEST.get(code, 21))
    path = str(tmp_path / "w.onnx")
    onnx.save(model, path)
    (y,) = [values.astype(np.float32)] if code in NEWEST else run_ort(model, {})
    np.testing.assert_array_equal(y, values.astype(np.float32))
    graph = rt.onnx.load(path)
    np.testing.assert_array_equal(rt.GraphModule(graph)().numpy(), y)
    assert rt.GraphModule(rt.onnx.load(path, device="meta"))().shape == (count,)


@pytest.mark.parametrize("code", list(NEW_TYPES), ids=[TensorProto.DataType.Name(c) for c in NEW_TYPES])
def test_a_graph_input_of_each_type(code):
    model = _model([helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT)],
                   [helper.make_tensor_value_info("x", code, [3, 5])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 5])], opset=NEWEST.get(code, 21))
    graph = rt.onnx.load(model)
    assert graph.inputs[0].dtype.np == np.dtype(NEW_TYPES[code])
    x = _values(NEW_TYPES[code], 15).reshape(3, 5)
    np.testing.assert_array_equal(rt.GraphModule(graph)(rt.tensor(x)).numpy(), x.astype(np.float32))


FLOAT8 = [TensorProto.FLOAT8E4M3FN, TensorProto.FLOAT8E4M3FNUZ, TensorProto.FLOAT8E5M2, TensorProto.FLOAT8E5M2FNUZ]


@pytest.mark.parametrize("saturate", [1, 0])
@pytest.mark.parametrize("code", FLOAT8, ids=[TensorProto.DataType.Name(c) for c in FLOAT8])
def test_cast_to_float8_saturates_as_asked(code, saturate):
    # beyond every float8 range, infinities, NaN, and values that round
    x = np.array([0.3, -1.7, 100.0, 300.0, -1e5, 6e4, np.inf, -np.inf, np.nan, 1e-9], np.float32)
    model = _model([helper.make_node("Cast", ["x"], ["q"], to=code, saturate=saturate),
                    helper.make_node("Cast", ["q"], ["y"], to=TensorProto.FLOAT)],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [x.size])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [x.size])])
    (want,) = run_ort(model, {"x": x})
    got = rt.GraphModule(rt.onnx.load(model))(rt.tensor(x)).numpy()
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("code", [TensorProto.INT4, TensorProto.UINT4, TensorProto.BFLOAT16, TensorProto.UINT16])
def test_cast_from_float(code):
    # ONNX leaves float -> integer rounding to the engine (onnxruntime rounds int4 halves away
    # from zero, its reference truncates): fractions below one half, where both agree
    x = np.array([0.4, 2.25, 3.0, -2.375, 7.2, 1.0, 6.49, 0.0], np.float32)
    if code == TensorProto.BFLOAT16:  # rounded to nearest even at 8 significant bits
        x = x * np.float32(1.0 + 2.0 ** -9) + np.float32(2.0 ** -12)
    if code in (TensorProto.UINT4, TensorProto.UINT16):
        x = np.abs(x)
    model = _model([helper.make_node("Cast", ["x"], ["q"], to=code),
                    helper.make_node("Cast", ["q"], ["y"], to=TensorProto.FLOAT)],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [x.size])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [x.size])])
    (want,) = run_ort(model, {"x": x})
    np.testing.assert_array_equal(rt.GraphModule(rt.onnx.load(model))(rt.tensor(x)).numpy(), want)


def test_arithmetic_in_uint64_and_bfloat16():
    a = np.array([2**63 + 5, 7, 1 << 40], np.uint64)
    b = np.array([3, 2**62, 9], np.uint64)
    model = _model([helper.make_node("Add", ["a", "b"], ["s"]), helper.make_node("Mul", ["a", "b"], ["p"])],
                   [helper.make_tensor_value_info(n, TensorProto.UINT64, [3]) for n in "ab"],
                   [helper.make_tensor_value_info(n, TensorProto.UINT64, [3]) for n in "sp"])
    want = run_ort(model, {"a": a, "b": b})
    got = rt.GraphModule(rt.onnx.load(model))(rt.tensor(a), rt.tensor(b))
    for w, g in zip(want, got):
        np.testing.assert_array_equal(g.numpy(), w)


def test_an_element_type_without_a_dtype_is_named():
    model = _model([helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT)],
                   [helper.make_tensor_value_info("x", TensorProto.COMPLEX64, [4])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])])
    with pytest.raises(rt.UnsupportedOpError, match=r"graph input 'x' has ONNX element type COMPLEX64, which "):
        rt.onnx.load(model)


def test_the_exporter_writes_bfloat16_and_int4_tensors(tmp_path):
    weight = rt.tensor(_values(ml_dtypes.bfloat16, 12).reshape(3, 4))
    codes = rt.tensor(_values(ml_dtypes.int4, 9))

    class Net(rt.nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = rt.nn.Parameter(weight)
            self.register_buffer("codes", codes)

        def forward(self, x):
            return x @ self.weight.t(), self.codes.to(rt.float32)

    net, x = Net(), rt.tensor(_values(ml_dtypes.bfloat16, 8).reshape(2, 4))
    path = str(tmp_path / "bf16.onnx")
    rt.onnx.export(net, path, x)
    stored = {t.name: t.data_type for t in onnx.load(path).graph.initializer}
    assert sorted(stored.values()) == sorted([TensorProto.BFLOAT16, TensorProto.INT4])
    want = net(x)
    got = rt.GraphModule(rt.onnx.load(path))(x)
    for w, g in zip(want, got):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g.numpy().astype(np.float32), w.numpy().astype(np.float32))


def test_float4_float8e8m0_and_int2_written_and_saved(tmp_path):
    """The exporter writes these types' tensors (packed by onnx), the importer reads them back,
    and a native file keeps them (safetensors lacks them: stored by their bytes or one per byte)."""
    w4 = _values(ml_dtypes.float4_e2m1fn, 9)
    scales = _values(ml_dtypes.float8_e8m0fnu, 3, seed=1)
    codes = _values(ml_dtypes.int2, 40, seed=2).reshape(5, 8)

    class Net(rt.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("w4", rt.tensor(w4))
            self.register_buffer("scales", rt.tensor(scales))
            self.register_buffer("codes", rt.tensor(codes))

        def forward(self, x):
            return x * self.w4.to(rt.float32), self.scales.to(rt.float32), self.codes.to(rt.float32)

    x = rt.tensor(np.arange(9, dtype=np.float32))
    path, native = str(tmp_path / "narrow.onnx"), str(tmp_path / "narrow.safetensors")
    rt.onnx.export(Net(), path, x)
    stored = {t.name: t.data_type for t in onnx.load(path).graph.initializer}
    assert {stored["w4"], stored["scales"], stored["codes"]} == {TensorProto.FLOAT4E2M1, TensorProto.FLOAT8E8M0,
                                                                 TensorProto.INT2}
    want = [x.numpy() * w4.astype(np.float32), scales.astype(np.float32), codes.astype(np.float32)]
    graph = rt.onnx.load(path)
    rt.save(graph, native)
    for loaded in (graph, rt.load(native)):
        for w, g in zip(want, rt.GraphModule(loaded)(x)):
            np.testing.assert_array_equal(g.numpy(), w)


def test_cast_to_float8e8m0_rounds_as_asked():
    """Cast-24 to FLOAT8E8M0 (a power of two) rounds up by default: 0.3 -> 0.5, 3 -> 4; down
    truncates the fraction; nearest ties on the dropped bits."""
    x = np.array([0.3, 3.0, 4.0, 5.0, 6.0, 1e-3, np.inf], np.float32)
    expected = {"up": [0.5, 4.0, 4.0, 8.0, 8.0, 2.0 ** -9, np.nan], "down": [0.25, 2.0, 4.0, 4.0, 4.0, 2.0 ** -10, np.nan],
                "nearest": [0.25, 4.0, 4.0, 4.0, 8.0, 2.0 ** -10, np.nan]}
    for mode, want in expected.items():
        model = _model([helper.make_node("Cast", ["x"], ["q"], to=TensorProto.FLOAT8E8M0, round_mode=mode),
                        helper.make_node("Cast", ["q"], ["y"], to=TensorProto.FLOAT)],
                       [helper.make_tensor_value_info("x", TensorProto.FLOAT, [x.size])],
                       [helper.make_tensor_value_info("y", TensorProto.FLOAT, [x.size])], opset=24)
        np.testing.assert_array_equal(rt.GraphModule(rt.onnx.load(model))(rt.tensor(x)).numpy(), np.array(want, np.float32), mode)
