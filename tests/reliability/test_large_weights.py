"""An ONNX file whose outputs have no declared shape is checked without copying its weights: the
checker needs shapes, inferred from a copy of the model that holds small initializers' values
and declares large ones by type and shape only (the file parsed again with its weights made a
512 MiB model peak at 3.1 GB). The scale benchmarks (``benchmarks/scale.py``) measure the RSS."""

from __future__ import annotations

import numpy as np
import pytest

import flopcount
from peak_memory import traced_peak

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from bad_corpus import onnx_model  # noqa: E402

ROWS, COLS = 1024, 4096  # 16 MiB of float32


def _matmul_then_reshape(path, weight: np.ndarray, declared: bool) -> str:
    """x [1, ROWS] @ W -> Reshape to [2, -1] (the target a small initializer inference reads)."""
    nodes = [helper.make_node("MatMul", ["x", "W"], ["h"], name="fc"),
             helper.make_node("Reshape", ["h", "target"], ["y"], name="fold")]
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, COLS // 2] if declared else None)
    model = onnx_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, ROWS])], [y],
                       [numpy_helper.from_array(weight, "W"), numpy_helper.from_array(np.array([2, -1]), "target")])
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    return str(path)


@pytest.mark.parametrize("declared", [True, False])
def test_an_undeclared_output_shape_costs_no_copy_of_the_weights(tmp_path, declared):
    weight = np.full((ROWS, COLS), 0.5, np.float32)
    path = _matmul_then_reshape(tmp_path / "m.onnx", weight, declared)
    with traced_peak() as memory:
        report = flopcount.profile(path)
    assert report.macs == ROWS * COLS and report.row("fold").output_shapes == ((2, COLS // 2),)
    assert memory.peak < weight.nbytes // 4, f"{memory.peak / 2**20:.1f} MiB traced for a 16 MiB weight"


def test_a_weight_of_the_wrong_size_is_still_refused_when_shapes_are_inferred(tmp_path):
    path = _matmul_then_reshape(tmp_path / "m.onnx", np.zeros((ROWS, COLS), np.float32), declared=False)
    model = onnx.load(path)
    model.graph.initializer[0].dims[1] = COLS + 1  # the raw data no longer fits the declared shape
    onnx.save(model, path)
    with pytest.raises(flopcount.ModelFileError, match="raw_data size"):
        flopcount.profile(path)


def _external_matmul(folder, weight: np.ndarray, offset: int = 64, length: int | None = None) -> str:
    """x [1, ROWS] @ W, W stored at ``offset`` of ``weights.bin`` next to the model."""
    with open(folder / "weights.bin", "wb") as f:
        f.write(b"\0" * offset + weight.tobytes())
    w = TensorProto(name="W", data_type=TensorProto.FLOAT, dims=list(weight.shape),
                    data_location=TensorProto.EXTERNAL)
    for key, value in (("location", "weights.bin"), ("offset", offset),
                       ("length", weight.nbytes if length is None else length)):
        entry = w.external_data.add()
        entry.key, entry.value = key, str(value)
    model = onnx_model([helper.make_node("MatMul", ["x", "W"], ["y"], name="fc")],
                       [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, ROWS])],
                       [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, COLS])], [w])
    path = folder / "model.onnx"
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    return str(path)


def test_external_weights_are_mapped_from_their_file_not_loaded(tmp_path):
    import flopcount.runtime as rt

    weight = np.random.default_rng(0).standard_normal((ROWS, COLS), dtype=np.float32)
    path = _external_matmul(tmp_path, weight)
    with traced_peak() as memory:
        graph = rt.onnx.load(path)
    array = graph.tensors["W"].data
    assert memory.peak < weight.nbytes // 4, f"{memory.peak / 2**20:.1f} MiB traced for a 16 MiB weight"
    assert not array.flags.writeable and np.array_equal(array, weight)   # a read-only view of the file
    x = np.random.default_rng(1).standard_normal((1, ROWS), dtype=np.float32)
    np.testing.assert_allclose(rt.GraphModule(graph)(rt.tensor(x)).numpy(), x @ weight, rtol=1e-4, atol=1e-4)
    report = flopcount.profile(path, latency=True, repeat=1, warmup=0)
    assert report.macs == ROWS * COLS and report.latency_ms is not None


@pytest.mark.parametrize("offset, length, fragment", [
    (64, ROWS * COLS * 4 - 4, "its shape [1024, 4096] needs 16777216"),       # shorter than the shape
    (64, ROWS * COLS * 4 + 4, "of 'weights.bin' (16777280 bytes)"),            # past the end of the file
])
def test_external_weights_outside_their_file_or_shape_are_refused(tmp_path, offset, length, fragment):
    path = _external_matmul(tmp_path, np.zeros((ROWS, COLS), np.float32), offset, length)
    with pytest.raises(flopcount.ModelFileError) as info:
        flopcount.profile(path)
    assert fragment in str(info.value) and "tensor 'W'" in str(info.value), info.value
