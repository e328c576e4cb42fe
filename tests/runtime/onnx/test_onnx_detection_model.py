"""A detection-style file (TopK on the scores, NonMaxSuppression, NonZero, gathers of what they
select) loads without an unsupported op, is counted (value-dependent sizes at their bounds), and
runs with onnxruntime's outputs."""

from __future__ import annotations

import numpy as np
import pytest

from onnx_check import assert_same, run_ort

import flopcount
import flopcount.runtime as rt

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

F, I = TensorProto.FLOAT, TensorProto.INT64


def _detector():
    """scores (1, 20), boxes (1, 20, 4) -> the 10 best boxes, NMS among them, their boxes, and
    the positions of the top scores above 0.5."""
    consts = {"k": np.array([10], np.int64), "zero": np.array([0], np.int64), "one": np.array([1], np.int64),
              "two": np.array(2, np.int64), "limit": np.array([5], np.int64), "iou": np.array([0.5], np.float32),
              "min_score": np.array([0.1], np.float32), "half": np.array(0.5, np.float32)}
    nodes = [
        helper.make_node("TopK", ["scores", "k"], ["top_scores", "top_index"], axis=1, name="top"),
        helper.make_node("Squeeze", ["top_index", "zero"], ["index"], name="squeeze"),
        helper.make_node("Gather", ["boxes", "index"], ["top_boxes"], axis=1, name="pick_boxes"),
        helper.make_node("Unsqueeze", ["top_scores", "one"], ["class_scores"], name="unsqueeze"),
        helper.make_node("NonMaxSuppression", ["top_boxes", "class_scores", "limit", "iou", "min_score"],
                         ["selected"], name="nms"),
        helper.make_node("Gather", ["selected", "two"], ["kept"], axis=1, name="kept_index"),
        helper.make_node("Gather", ["top_boxes", "kept"], ["kept_boxes"], axis=1, name="kept_boxes"),
        helper.make_node("Greater", ["top_scores", "half"], ["confident"], name="confident"),
        helper.make_node("NonZero", ["confident"], ["where"], name="nonzero"),
    ]
    graph = helper.make_graph(nodes, "detector", [helper.make_tensor_value_info("scores", F, [1, 20]),
                                                  helper.make_tensor_value_info("boxes", F, [1, 20, 4])],
                              [helper.make_tensor_value_info("kept_boxes", F, None),
                               helper.make_tensor_value_info("where", I, None)],
                              [onnx.numpy_helper.from_array(v, k) for k, v in consts.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _inputs(seed: int):
    rng = np.random.default_rng(seed)
    corners = rng.uniform(0, 6, (1, 20, 2)).astype(np.float32)
    boxes = np.concatenate([corners, corners + rng.uniform(1, 3, (1, 20, 2)).astype(np.float32)], -1)
    return {"scores": rng.uniform(0, 1, (1, 20)).astype(np.float32), "boxes": boxes}


def test_loads_with_nothing_unsupported_and_counts_at_the_bounds(tmp_path):
    path = str(tmp_path / "detector.onnx")
    onnx.save(_detector(), path)
    graph = rt.onnx.load(path, strict=True)
    assert {"topk", "non_max_suppression", "nonzero"} <= {n.op_name for n in graph.nodes}
    report = flopcount.profile(path)
    assert report.unsupported == []
    # the bounds: NMS keeps 5 boxes of its one class, NonZero finds all 10 top scores
    assert [v.shape for v in graph.outputs] == [(1, 5, 4), (2, 10)]
    topk = next(r for r in report.ops if r.op == "topk")
    assert topk.flops == 20 * (4 + 1)        # a heap of 10: ceil(log2 10) + 1 comparisons per score


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_runs_with_onnxruntime_s_outputs(seed):
    model = _detector()
    feeds = _inputs(seed)
    graph = rt.onnx.load(model)
    ours = rt.GraphModule(graph)(*[rt.tensor(a) for a in feeds.values()])
    theirs = run_ort(model, feeds)
    assert ours[0].shape[1] <= 5 and ours[1].shape[1] <= 10   # the exact sizes, within the bounds
    assert_same(list(ours), theirs)
