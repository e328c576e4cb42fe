"""``wire.py`` reads the protobuf wire format by hand (a deliberate exception, measured in
ARCHITECTURE.md), so hypothesis checks it against protobuf itself: on any ModelProto it draws
(initializers of every layout: raw, typed, external, several of them, fields in any order),
and on those bytes corrupted, the split is either declined (None) or exactly protobuf's reading
of the file with the raw data taken out, each span holding that tensor's raw bytes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from flopcount.runtime.onnx import wire
from flopcount.runtime.onnx.elem_types import TO_DTYPE

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

TYPES = {TensorProto.FLOAT: np.float32, TensorProto.INT64: np.int64, TensorProto.FLOAT16: np.float16,
         TensorProto.INT8: np.int8, TensorProto.DOUBLE: np.float64}
LAYOUTS = ("raw", "raw", "typed", "external", "raw_and_typed", "empty")


@st.composite
def tensors(draw, index: int):
    data_type = draw(st.sampled_from(sorted(TYPES)))
    dims = draw(st.lists(st.integers(0, 4), min_size=0, max_size=3))
    count = int(np.prod(dims, dtype=np.int64))
    values = np.arange(count).astype(TYPES[data_type])
    t = TensorProto(name=f"w{index}" + "_" * draw(st.integers(0, 130)), data_type=data_type, dims=dims)
    layout = draw(st.sampled_from(LAYOUTS))
    if layout in ("raw", "raw_and_typed"):
        t.raw_data = values.tobytes()
    if layout in ("typed", "raw_and_typed") and data_type == TensorProto.INT64:
        t.int64_data.extend(int(v) for v in values)
    elif layout in ("typed", "raw_and_typed"):
        t.float_data.extend(float(v) for v in values.astype(np.float32))
    if layout == "external":
        t.data_location = TensorProto.EXTERNAL
        t.external_data.add(key="location", value="weights.bin")
    if draw(st.booleans()):
        t.doc_string = "after the data"
    return t


def _is_plain(t) -> bool:
    """A tensor whose data is its raw bytes alone: the only kind the importer may take from spans."""
    typed = (t.float_data, t.int32_data, t.int64_data, t.double_data, t.uint64_data, t.string_data)
    return (t.data_type in TO_DTYPE and not any(typed) and not t.external_data
            and t.data_location == TensorProto.DEFAULT and not t.HasField("segment"))


@st.composite
def models(draw):
    inits = [draw(tensors(i)) for i in range(draw(st.integers(0, 5)))]
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])], initializer=inits)
    if draw(st.booleans()):
        graph.doc_string = "a graph"
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    if draw(st.booleans()):
        model.metadata_props.add(key="k", value="v" * draw(st.integers(0, 200)))
    return model


def _check_against_protobuf(data: bytes) -> None:
    split = wire.split_weights(data, TO_DTYPE)
    if split is None:
        return
    light, spans = split
    whole = onnx.ModelProto()
    whole.ParseFromString(data)   # a split is only ever made of bytes protobuf reads
    parsed = onnx.load_model_from_string(light)
    assert len(spans) == len(whole.graph.initializer) and any(spans)
    for init, span in zip(whole.graph.initializer, spans):
        if span is not None:
            offset, length = span
            assert data[offset:offset + length] == init.raw_data and _is_plain(init)
            init.ClearField("raw_data")
    assert parsed == whole


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(models(), st.one_of(st.none(), models()))
def test_split_is_protobufs_reading_without_the_raw_data(model, appended):
    data = model.SerializeToString()
    if appended is not None:
        # a second graph field later in the file: protobuf merges the two graphs
        data += onnx.ModelProto(graph=appended.graph).SerializeToString()
    _check_against_protobuf(data)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(models(), st.data())
def test_corrupted_bytes_are_declined_or_read_as_protobuf_reads_them(model, data):
    raw = bytearray(model.SerializeToString())
    for _ in range(data.draw(st.integers(1, 4))):
        how = data.draw(st.sampled_from(("flip", "cut", "insert")))
        at = data.draw(st.integers(0, max(len(raw) - 1, 0)))
        if how == "flip" and raw:
            raw[at] ^= data.draw(st.integers(1, 255))
        elif how == "cut":
            del raw[at:at + data.draw(st.integers(1, 8))]
        else:
            raw[at:at] = data.draw(st.binary(min_size=1, max_size=4))
    try:
        onnx.ModelProto().ParseFromString(bytes(raw))
    except Exception:
        # bytes protobuf refuses: the split must not make a model of them either
        split = wire.split_weights(bytes(raw), TO_DTYPE)
        if split is not None:
            with pytest.raises(Exception):
                onnx.load_model_from_string(split[0])
        return
    _check_against_protobuf(bytes(raw))
