"""The Chrome trace of a graph imported from ONNX names its events after the file's nodes, as
onnxruntime's profiler does, so the two traces of one file join on the event name."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from data.make_onnx_fixtures import FIXTURES, HERE

import flopcount

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")


def _ort_events(path: str, inputs: dict, tmp_path) -> list:
    """onnxruntime's node events for one run of ``path``; graph optimizations off, so its nodes
    are the file's (no fused kernels under new names)."""
    options = ort.SessionOptions()
    options.enable_profiling = True
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.profile_file_prefix = os.path.join(tmp_path, "ort")
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    feeds = {name: np.ones(shape, dtype) for name, (shape, dtype, _) in inputs.items()}
    session.run(None, feeds)
    with open(session.end_profiling()) as f:
        return [e for e in json.load(f) if e.get("cat") == "Node"]


def _ours(path: str, inputs: dict) -> list:
    # laid out by roofline estimates: names and shapes are what is compared here, not times
    report = flopcount.profile(path, input_shape=[shape for shape, _, _ in inputs.values()], hardware="a100-80gb")
    return [e for e in report.chrome_trace()["traceEvents"] if e.get("cat") == "Node"]


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_event_names_are_onnxruntime_node_names(name, tmp_path):
    inputs = FIXTURES[name][3]
    path = os.path.join(HERE, name)
    theirs = {e["name"] for e in _ort_events(path, inputs, tmp_path)}
    ours = _ours(path, inputs)
    assert ours and all(e["name"] in theirs for e in ours), sorted({e["name"] for e in ours} - theirs)[:5]
    # onnxruntime's other nodes are the ones import folded away (shape arithmetic, constant
    # masks, Identity); the heavy ones all join
    heavy = {f"{n.name}_kernel_time" for n in onnx.load(path).graph.node
             if n.op_type in ("Conv", "Gemm", "MatMul", "Softmax", "LayerNormalization")}
    assert heavy and heavy <= {e["name"] for e in ours}


def test_cnn_traces_join_node_for_node(tmp_path):
    inputs = FIXTURES["cnn_torchscript_op13.onnx"][3]
    path = os.path.join(HERE, "cnn_torchscript_op13.onnx")
    theirs = {e["name"]: e for e in _ort_events(path, inputs, tmp_path)}
    ours = _ours(path, inputs)
    types = {n.name: n.op_type for n in onnx.load(path).graph.node}
    # every node but the four Identity nodes the exporter added for merged initializers
    # (import passes their input through) is one event of ours
    missing = {n[: -len("_kernel_time")] for n in set(theirs) - {e["name"] for e in ours}}
    assert {types[n] for n in missing} == {"Identity"} and len(missing) == 4
    assert len(ours) == len(theirs) - 4
    for event in ours:
        other = theirs[event["name"]]
        # joined on the name, the two events describe the same node: same activation shapes
        assert event["args"]["input_type_shape"][0] == other["args"]["input_type_shape"][0], event["name"]
        assert event["args"]["output_type_shape"] == other["args"]["output_type_shape"], event["name"]


def test_traced_graphs_keep_their_own_node_names():
    import flopcount.runtime as rt

    report = flopcount.profile(rt.nn.Linear(3, 2), rt.ones(4, 3), hardware="a100-80gb")
    assert [e["name"] for e in report.chrome_trace()["traceEvents"] if e.get("cat") == "Node"] == ["/linear_kernel_time"]
