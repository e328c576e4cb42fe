"""An ONNX file's weights are adopted, not copied: ``wire.py`` finds each initializer's raw
data in the file's bytes, the importer aligns it in place and makes read-only views (checked
against the declared shapes), in-place writes copy first (copy-on-write), and a meta import
makes no weight arrays at all."""

from __future__ import annotations

import gc
import os
import tracemalloc

import numpy as np
import pytest

import flopcount
import flopcount.runtime as rt
from flopcount.runtime.onnx import wire
from flopcount.runtime.onnx.elem_types import TO_DTYPE
from flopcount.runtime.onnx.reading import SHAPE_DATA_MAX, FileWeights

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

FLOAT, DOUBLE, INT64, INT32, FLOAT16, INT8 = 1, 11, 7, 6, 10, 3


def _mlp(pad: int = 0):
    """x (2, 64) -> MatMul w1 (64, 96) -> Add b1 -> Relu -> MatMul w2 (96, 80); ``pad`` lengthens
    the initializers' names, which moves their raw data to other offsets in the file."""
    rng = np.random.default_rng(pad)
    w1 = rng.standard_normal((64, 96)).astype(np.float32)
    b1 = rng.standard_normal(96).astype(np.float32)
    w2 = rng.standard_normal((96, 80)).astype(np.float32)
    n = {k: k + "_" * pad for k in ("w1", "b1", "w2")}
    nodes = [helper.make_node("MatMul", ["x", n["w1"]], ["h"], name="fc1"),
             helper.make_node("Add", ["h", n["b1"]], ["hb"], name="bias"),
             helper.make_node("Relu", ["hb"], ["r"], name="act"),
             helper.make_node("MatMul", ["r", n["w2"]], ["y"], name="fc2")]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 80])],
                              initializer=[numpy_helper.from_array(a, n[k]) for k, a in
                                           (("w1", w1), ("b1", b1), ("w2", w2))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return model, {n[k]: a for k, a in (("w1", w1), ("b1", b1), ("w2", w2))}


def _write(tmp_path, model, name: str = "mlp.onnx") -> str:
    path = os.path.join(tmp_path, name)
    onnx.save(model, path)
    return path


def _reference(weights: dict, x: np.ndarray) -> np.ndarray:
    w1, b1, w2 = weights.values()
    return np.maximum(x @ w1 + b1, 0) @ w2


@pytest.mark.parametrize("pad", range(8))
def test_weights_are_aligned_read_only_views_of_the_file(tmp_path, pad):
    model, weights = _mlp(pad)
    path = _write(tmp_path, model)
    graph = rt.onnx.load(path)
    for name, expected in weights.items():
        array = graph.tensors[name].data
        np.testing.assert_array_equal(array, expected)
        assert array.flags.aligned
        if expected.size > SHAPE_DATA_MAX:  # a view of the file's bytes, not a copy
            assert not array.flags.owndata and not array.flags.writeable
        else:  # small: copied, so it does not keep the file's bytes alive
            assert array.flags.owndata
    x = np.random.default_rng(1).standard_normal((2, 64)).astype(np.float32)
    with rt.no_grad():
        np.testing.assert_allclose(rt.GraphModule(graph)(rt.tensor(x)).numpy(), _reference(weights, x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("populate", [True, False], ids=["anonymous-map", "bytearray"])
def test_the_file_is_read_into_either_kind_of_buffer(tmp_path, monkeypatch, populate):
    """Where MAP_POPULATE is missing (not Linux) the file goes into a bytearray instead."""
    from flopcount.runtime.onnx import reading

    if not populate:
        monkeypatch.delattr(reading.mmap, "MAP_POPULATE", raising=False)
    elif not hasattr(reading.mmap, "MAP_POPULATE"):
        pytest.skip("this platform has no MAP_POPULATE")
    model, weights = _mlp(3)
    path = _write(tmp_path, model)
    with open(path, "rb") as f:
        buffer = reading._read_into_buffer(f)
    assert isinstance(buffer, reading.mmap.mmap if populate else bytearray)
    with open(path, "rb") as f:
        assert bytes(buffer) == f.read()
    graph = rt.onnx.load(path)
    for name, expected in weights.items():
        np.testing.assert_array_equal(graph.tensors[name].numpy(), expected)


def test_an_imported_weight_can_be_updated_in_place(tmp_path):
    model, weights = _mlp()
    path = _write(tmp_path, model)
    with open(path, "rb") as f:
        before = f.read()
    graph = rt.onnx.load(path)
    w2 = graph.tensors["w2"]
    adopted = w2.data
    with rt.no_grad():
        w2.add_(1.0)
    np.testing.assert_array_equal(w2.numpy(), weights["w2"] + 1)
    np.testing.assert_array_equal(adopted, weights["w2"])  # the adopted bytes are untouched
    x = np.random.default_rng(2).standard_normal((2, 64)).astype(np.float32)
    changed = dict(weights, w2=weights["w2"] + 1)
    with rt.no_grad():
        np.testing.assert_allclose(rt.GraphModule(graph)(rt.tensor(x)).numpy(), _reference(changed, x), rtol=1e-5, atol=1e-4)
    with open(path, "rb") as f:
        assert f.read() == before
    np.testing.assert_array_equal(rt.onnx.load(path).tensors["w2"].numpy(), weights["w2"])


def test_a_training_step_on_an_imported_graph(tmp_path):
    model, weights = _mlp()
    graph = rt.onnx.load(_write(tmp_path, model))
    params = [graph.tensors[name] for name in weights]
    x = rt.tensor(np.random.default_rng(3).standard_normal((2, 64)).astype(np.float32))
    rt.GraphModule(graph)(x).sum().backward()
    grads = [p.grad.numpy().copy() for p in params]
    rt.optim.SGD(params, lr=0.01).step()
    for p, g, (name, w) in zip(params, grads, weights.items()):
        np.testing.assert_allclose(p.numpy(), w - 0.01 * g, rtol=1e-6, atol=1e-7, err_msg=name)


def test_a_model_proto_is_imported_and_left_as_it_was(tmp_path):
    model, weights = _mlp()
    raw = model.graph.initializer[0].raw_data
    graph = rt.onnx.load(model)
    with rt.no_grad():
        graph.tensors["w1"].mul_(2.0)
    np.testing.assert_array_equal(graph.tensors["w1"].numpy(), 2 * weights["w1"])
    assert model.graph.initializer[0].raw_data == raw


def test_a_meta_import_allocates_nothing_for_weights(tmp_path):
    rng = np.random.default_rng(4)
    w = rng.standard_normal((512, 1024)).astype(np.float32)   # 2 MiB
    node = helper.make_node("MatMul", ["x", "w"], ["y"], name="fc")
    graph = helper.make_graph([node], "big", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 512])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1024])],
                              initializer=[numpy_helper.from_array(w, "w")])
    path = _write(tmp_path, helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), "big.onnx")
    rt.onnx.load(path, device="meta")  # imports and caches what a first import does
    gc.collect()
    tracemalloc.start()
    try:
        meta = rt.onnx.load(path, device="meta")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < w.nbytes / 8, peak
    assert meta.device.type == "meta" and meta.tensors["w"].data is None
    on_cpu, on_meta = flopcount.profile(path), flopcount.profile(path, device="meta")
    assert on_meta.macs == on_cpu.macs == 512 * 1024
    assert (on_meta.flops, on_meta.params, on_meta.memory.predicted_peak) == \
        (on_cpu.flops, on_cpu.params, on_cpu.memory.predicted_peak)


# --- sizes: what the checker checks of raw data, checked by the importer -----------------------

def _one_weight(tensor: TensorProto) -> TensorProto:
    node = helper.make_node("MatMul", ["x", tensor.name], ["y"], name="fc")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 80])],
                              initializer=[tensor])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("dims, size, fragment", [
    ([64, 80], 64 * 80 * 4 + 4, "20484 bytes"),     # more than the shape holds
    ([64, 80], 64 * 80 * 4 - 4, "20476 bytes"),     # less
    ([-64, 80], 64 * 80 * 4, "Negative dimension"),
])
def test_raw_data_that_does_not_fit_its_shape(tmp_path, dims, size, fragment):
    weight = TensorProto(name="W", data_type=TensorProto.FLOAT, dims=dims, raw_data=b"\0" * size)
    path = _write(tmp_path, _one_weight(weight), "bad.onnx")
    with pytest.raises(rt.ModelFileError) as error:
        rt.onnx.load(path)
    message = str(error.value)
    assert message.startswith(f"{path}: not a valid ONNX model: ") and "name: W" in message and fragment in message


# --- wire.py ------------------------------------------------------------------------------------

def test_split_weights_takes_out_exactly_the_raw_data():
    model, weights = _mlp(3)
    data = model.SerializeToString()
    light, spans = wire.split_weights(data, TO_DTYPE)
    assert len(light) < len(data) - sum(a.nbytes for a in weights.values())
    parsed = onnx.load_model_from_string(light)
    for init, span, (name, array) in zip(parsed.graph.initializer, spans, weights.items()):
        assert init.name == name and not init.HasField("raw_data") and list(init.dims) == list(array.shape)
        offset, length = span
        assert data[offset:offset + length] == array.tobytes()
    for init in model.graph.initializer:
        init.ClearField("raw_data")
    assert parsed == model  # nothing else changed


def test_split_weights_leaves_other_tensors_whole():
    model, _ = _mlp()
    inits = model.graph.initializer
    inits[0].float_data.append(1.0)                       # raw data and typed data: invalid, the checker says so
    inits[1].data_type = 14                               # COMPLEX64: no runtime dtype
    light, spans = wire.split_weights(model.SerializeToString(), TO_DTYPE)
    assert spans[0] is None and spans[1] is None and spans[2] is not None
    parsed = onnx.load_model_from_string(light)
    assert parsed.graph.initializer[0].raw_data == inits[0].raw_data


def test_split_weights_declines_what_it_does_not_read_as_protobuf_would():
    model, _ = _mlp()
    data = model.SerializeToString()
    twice = data + data  # two graph fields: protobuf merges them into one graph
    assert wire.split_weights(twice, TO_DTYPE) is None
    assert wire.split_weights(b"", TO_DTYPE) is None
    assert wire.split_weights(b"\x3b\x00", TO_DTYPE) is None   # a group (wire type 3)
    assert wire.split_weights(data[:-5], TO_DTYPE) is None     # truncated


# --- FileWeights: alignment in place ------------------------------------------------------------

@pytest.mark.parametrize("seed", range(6))
def test_raw_data_is_aligned_in_place_and_keeps_its_values(seed):
    rng = np.random.default_rng(seed)
    codes = [DOUBLE, INT64, FLOAT, INT32, FLOAT16, INT8, DOUBLE, FLOAT]
    data, spans, types, arrays = bytearray(), [], [], []
    for code in codes:
        data += bytes([0xAA]) * int(rng.integers(2, 11))   # a header of 2 to 10 bytes
        array = (rng.standard_normal(SHAPE_DATA_MAX + 7) * 100).astype(TO_DTYPE[code].np)
        spans.append((len(data), array.nbytes))
        types.append(code)
        arrays.append(array)
        data += array.tobytes()
    data += b"\xaa\xaa"
    weights = FileWeights(data, spans, types)
    for i, (code, array) in enumerate(zip(codes, arrays)):
        got = weights.array(i, TO_DTYPE[code], array.shape)
        np.testing.assert_array_equal(got, array)
        assert got.flags.aligned and not got.flags.writeable
    # every array made in place needs no memory of its own
    assert sum(not weights.array(i, TO_DTYPE[c], a.shape).flags.owndata for i, (c, a) in
               enumerate(zip(codes, arrays))) >= len(codes) - 2
