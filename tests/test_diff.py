"""``diff``: two reports row by row. A float ONNX export and its QDQ-quantized export pair every
Conv, Gemm and MatMul; a deeper ResNet adds exactly its extra blocks; renamed layers pair by
position and type (the command line: tests/cli/test_diff_command.py)."""


import numpy as np
import pytest

import flopcount
import flopcount.runtime as rt

nn = rt.nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
        self.proj = nn.Parameter(rt.randn(8 * 8 * 8, 32))
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        x = self.conv2(self.conv1(x).relu()).relu()
        return self.fc(x.flatten(1) @ self.proj)


@pytest.fixture(scope="module")
def float_and_qdq(tmp_path_factory):
    pytest.importorskip("onnxruntime")
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    folder = tmp_path_factory.mktemp("qdq")
    plain, quantized = str(folder / "float.onnx"), str(folder / "qdq.onnx")
    rt.manual_seed(0)
    rt.onnx.export(Net().eval(), plain, rt.randn(1, 3, 8, 8))

    class Reader(CalibrationDataReader):
        def __init__(self):
            gen = np.random.default_rng(0)
            self.batches = iter([{"x": gen.random((1, 3, 8, 8), dtype=np.float32)} for _ in range(2)])

        def get_next(self):
            return next(self.batches, None)

    quantize_static(plain, quantized, Reader(), quant_format=QuantFormat.QDQ,
                    activation_type=QuantType.QInt8, weight_type=QuantType.QInt8)
    import onnx

    kinds = [n.op_type for n in onnx.load(quantized).graph.node]
    assert "QuantizeLinear" in kinds and "DequantizeLinear" in kinds and kinds.count("Conv") == 2
    return plain, quantized


def test_float_and_qdq_exports_pair_every_conv_and_matmul(float_and_qdq):
    plain, quantized = float_and_qdq
    a, b = flopcount.profile(plain), flopcount.profile(quantized)
    d = a.diff(b, by="op")
    heavy = ("conv", "matmul", "linear")
    paired = [r for r in d.rows if r.a is not None and r.b is not None]
    for report, side in ((a, "a"), (b, "b")):
        names = {o.name for o in report.by_op("forward") if o.op in heavy}
        assert len(names) == 4  # two convs, the matmul, the fc
        assert names == {getattr(r, side).name for r in paired if r.a.kind in heavy}
    for r in paired:
        assert r.a.kind == r.b.kind and r.a.macs == r.b.macs  # quantizing keeps each GEMM's MACs
    # the Q/DQ arithmetic is what B adds
    added = {r.b.kind for r in d.rows if r.status == "added"}
    assert added and added <= {"div", "round", "add", "clamp", "cast", "sub", "mul", "reshape", "quantize",
                               "dequantize"}
    assert d.totals["macs"][2] == b.macs - a.macs


def test_a_deeper_resnet_adds_its_extra_blocks():
    a, b = flopcount.profile("resnet18"), flopcount.profile("resnet34")
    d = a.diff(b)
    layers_a = {r.name for r in a.rows if r.kind != "op" and r.name}
    layers_b = {r.name for r in b.rows if r.kind != "op" and r.name}
    assert {r.b.name for r in d.rows if r.status == "added"} == layers_b - layers_a
    assert d.count("removed") == 0
    assert d.totals["macs"] == (a.macs, b.macs, b.macs - a.macs)
    assert d.totals["params"] == (a.params, b.params, b.params - a.params)
    changed = {r.a.name for r in d.rows if r.status == "changed"}
    assert changed == {"layer1", "layer2", "layer3", "layer4"}  # holding the new blocks


def test_renamed_layers_pair_by_position_and_type():
    class Renamed(nn.Module):
        def __init__(self):
            super().__init__()
            self.first = nn.Linear(4, 8)
            self.act = nn.ReLU()
            self.second = nn.Linear(8, 2)

        def forward(self, x):
            return self.second(self.act(self.first(x)))

    x = rt.randn(2, 4)
    a = flopcount.profile(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)), x)
    b = flopcount.profile(Renamed(), x)
    d = a.diff(b)
    assert [(r.a.name, r.b.name, r.matched_by, r.status) for r in d.rows] == [
        ("0", "first", "position", "same"), ("1", "act", "position", "same"), ("2", "second", "position", "same")]
