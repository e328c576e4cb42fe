"""ONNX's quantization ops against onnxruntime: QuantizeLinear / DequantizeLinear per tensor,
per axis and blocked, DynamicQuantizeLinear, MatMulInteger, ConvInteger, QLinearMatMul and
QLinearConv, in uint8 and int8; their MACs are the integer matmul's and conv's."""

from __future__ import annotations

import numpy as np
import pytest

from onnx_check import C, Case, compare, randn, rng

import flopcount

QUANTIZED_OPS = {"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "MatMulInteger", "ConvInteger",
                 "QLinearMatMul", "QLinearConv"}


def _q(shape, dtype=np.uint8, seed: int = 0):
    info = np.iinfo(dtype)
    return rng(seed).integers(info.min, info.max + 1, shape).astype(dtype)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_quantize_and_dequantize_per_tensor_and_per_axis(dtype):
    x = randn(2, 3, 4, 4) * 3
    compare(Case("QuantizeLinear", [x, C(np.float32(0.05)), C(dtype(3))], opset=13, atol=0))
    scales, zeros = np.array([0.02, 0.1, 0.07], np.float32), np.array([1, -2, 5], dtype) if dtype == np.int8 \
        else np.array([1, 200, 5], dtype)
    compare(Case("QuantizeLinear", [x, C(scales), C(zeros)], {"axis": 1}, opset=13, atol=0))
    q = _q((2, 3, 4, 4), dtype)
    compare(Case("DequantizeLinear", [q, C(np.float32(0.05)), C(dtype(3))], opset=13))
    compare(Case("DequantizeLinear", [q, C(scales), C(zeros)], {"axis": 1}, opset=13))


def test_blocked_quantization():
    x = randn(4, 10) * 2
    scales = np.abs(randn(4, 3, seed=1)) / 10 + 0.01   # blocks of 4 along dim 1, the last one short
    zeros = _q((4, 3), np.int8, seed=2) // 8
    compare(Case("QuantizeLinear", [x, C(scales), C(zeros)], {"axis": 1, "block_size": 4}, opset=21, atol=0))
    compare(Case("DequantizeLinear", [_q((4, 10), np.int8), C(scales), C(zeros)], {"axis": 1, "block_size": 4},
                 opset=21))


def test_dynamic_quantize_linear():
    compare(Case("DynamicQuantizeLinear", [randn(3, 7) * 4 + 1], outputs=3, opset=11, atol=0))
    compare(Case("DynamicQuantizeLinear", [np.abs(randn(5)) + 0.5], outputs=3, opset=11, atol=0))


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_matmul_integer_and_qlinear_matmul(dtype):
    a, b = _q((2, 5, 8), dtype), _q((8, 6), dtype, seed=1)
    graph = compare(Case("MatMulInteger", [a, C(b), C(dtype(2)), C(dtype(7))], opset=10, atol=0))
    report = flopcount.profile(graph, *[flopcount.runtime.tensor(a)])
    assert report.macs == 2 * 5 * 8 * 6
    assert report.totals["macs_by_dtype"] == {"int8": report.macs}  # run as int32, counted as int8
    compare(Case("QLinearMatMul", [a, C(np.float32(0.02)), C(dtype(2)), C(b), C(np.float32(0.03)), C(dtype(7)),
                                   C(np.float32(0.1)), C(dtype(4))], opset=10, atol=0))


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_conv_integer_and_qlinear_conv(dtype):
    x, w = _q((1, 3, 7, 7), dtype), _q((4, 3, 3, 3), np.int8 if dtype == np.int8 else np.uint8, seed=1)
    attrs = {"pads": [1, 1, 1, 1], "strides": [2, 2]}
    graph = compare(Case("ConvInteger", [x, C(w), C(dtype(3)), C(w.dtype.type(1))], attrs, opset=10, atol=0))
    report = flopcount.profile(graph, flopcount.runtime.tensor(x))
    assert report.macs == 4 * 4 * 4 * 3 * 3 * 3
    assert report.totals["macs_by_dtype"] == {"int8": report.macs}  # run as float64, counted as int8
    w8 = _q((4, 3, 3, 3), np.int8, seed=1)
    bias = rng(2).integers(-500, 500, 4).astype(np.int32)
    scales = np.array([0.01, 0.02, 0.015, 0.03], np.float32)
    compare(Case("QLinearConv", [x, C(np.float32(0.05)), C(dtype(3)), C(w8), C(scales), C(np.zeros(4, np.int8)),
                                 C(np.float32(0.2)), C(dtype(10)), C(bias)], attrs, opset=10, atol=0))


def test_a_qdq_resnet18_from_onnxruntimes_quantizer(tmp_path):
    """onnxruntime's static quantization of flopcount's own resnet18 export: the same MACs as the
    float file, the int8 weights as the parameters (one byte each), outputs close to onnxruntime's
    (which fuses each QDQ conv into an integer kernel; the requantization rounds differently)."""
    quantization = pytest.importorskip("onnxruntime.quantization")
    import onnxruntime as ort

    import flopcount.runtime as rt
    from flopcount import models

    x = randn(1, 3, 32, 32)
    float_path, qdq_path = str(tmp_path / "r18.onnx"), str(tmp_path / "r18_qdq.onnx")
    rt.onnx.export(models.get("resnet18").eval(), float_path, rt.tensor(x))
    name = ort.InferenceSession(float_path).get_inputs()[0].name

    class Calibration(quantization.CalibrationDataReader):
        def __init__(self):
            self.batches = iter([{name: randn(1, 3, 32, 32, seed=s)} for s in range(2)])

        def get_next(self):
            return next(self.batches, None)

    quantization.quantize_static(float_path, qdq_path, Calibration(), quant_format=quantization.QuantFormat.QDQ,
                                 activation_type=quantization.QuantType.QUInt8,
                                 weight_type=quantization.QuantType.QInt8)
    fp, qdq = (flopcount.profile(p, input_shape=(1, 3, 32, 32)) for p in (float_path, qdq_path))
    assert qdq.macs == fp.macs
    # the same MACs, now int8 MACs: every conv and the fc read dequantized int8 data and weights
    assert fp.totals["macs_by_dtype"] == {"float32": fp.macs}
    assert qdq.totals["macs_by_dtype"] == {"int8": fp.macs}
    convs = [r for r in qdq.by_op("forward") if r.op == "conv"]
    assert len(convs) == 20 and all(r.mac_dtype == "int8" for r in convs)
    assert sum(r.macs_by_dtype.get("int8", 0) for r in qdq.rows if r.kind == "op") == fp.macs
    native = str(tmp_path / "r18_qdq.safetensors")  # a native file keeps what the MACs run in
    rt.save(rt.onnx.load(qdq_path, input_shapes={name: (1, 3, 32, 32)}), native)
    assert flopcount.profile(native).totals["macs_by_dtype"] == {"int8": fp.macs}
    # one byte per int8 number the file stores, and those include every conv and fc weight of
    # resnet18: 11,689,512 parameters less the fc bias (1,000) and the 4,800 batch norms' 9,600
    import onnx

    graph = onnx.load(qdq_path).graph
    dequantized = {n.input[0] for n in graph.node if n.op_type == "DequantizeLinear"}
    stored = sum(int(np.prod(t.dims)) for t in graph.initializer
                 if t.data_type == onnx.TensorProto.INT8 and t.name in dequantized)
    assert qdq.memory.parameters["int8"] == stored >= 11_689_512 - 1_000 - 9_600
    assert "int8" not in fp.memory.parameters
    (want,) = ort.InferenceSession(qdq_path, providers=["CPUExecutionProvider"]).run(None, {name: x})
    got = rt.GraphModule(rt.onnx.load(qdq_path))(rt.tensor(x)).numpy()
    assert np.abs(got - want).max() <= 0.05 * np.abs(want).max()
