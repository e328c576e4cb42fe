"""roi_align and non_max_suppression: small cases worked by hand, and torchvision's ops where
installed (roi_align with aligned=True/False, nms per class)."""

import numpy as np
import pytest

import flopcount.runtime as rt
from flopcount.runtime.ops.detection import non_max_suppression, roi_align
from opcheck import Example, randn, run_example

IMAGE = np.arange(32, dtype=np.float64).reshape(1, 2, 4, 4)
ROIS = np.array([[0.0, 0.0, 2.0, 2.0], [1.0, 1.0, 3.0, 3.0]])
BATCH = np.array([0, 0])
# boxes [y1, x1, y2, x2]: 1 overlaps 0 by IoU 0.68, 2 is apart
BOXES = np.array([[[0.0, 0.0, 1.0, 1.0], [0.0, 0.1, 1.0, 1.1], [0.0, 2.0, 1.0, 3.0]]], dtype=np.float32)
SCORES = np.array([[[0.9, 0.95, 0.5], [0.1, 0.2, 0.3]]], dtype=np.float32)


def _roi_ref(x, rois, batch):
    """aligned=True, one sample per bin at its centre: the bilinear value at (1.0, 1.0) - 0.5·…
    worked out: region [0, 2]² shifted by -0.5 has its 1x1 bin centred at (0.5, 0.5)."""
    out = np.zeros((2, 2, 1, 1))
    for r, (x1, y1, x2, y2) in enumerate(rois):
        cy, cx = (y1 + y2) / 2 - 0.5, (x1 + x2) / 2 - 0.5
        y0, x0 = int(np.floor(cy)), int(np.floor(cx))
        ly, lx = cy - y0, cx - x0
        plane = x[int(batch[r])]
        out[r, :, 0, 0] = ((1 - ly) * (1 - lx) * plane[:, y0, x0] + (1 - ly) * lx * plane[:, y0, x0 + 1]
                           + ly * (1 - lx) * plane[:, y0 + 1, x0] + ly * lx * plane[:, y0 + 1, x0 + 1])
    return out


EXAMPLES = {
    # one sample per bin: 8 FLOPs + 1 divide per output element of (2, 2, 1, 1)
    "roi_align": Example(lambda x, r, b: roi_align(x, r, b, (1, 1), sampling_ratio=1, aligned=True),
                         [IMAGE, ROIS, BATCH], _roi_ref, grad=False, flops=9 * 4),
    # value-dependent size: kept boxes, not the meta bound (which test_nms_bound checks)
    "non_max_suppression": Example(lambda b, s: non_max_suppression(b, s, 2, 0.5),
                                   [BOXES, SCORES], lambda b, s: np.array([[0, 0, 1], [0, 0, 2], [0, 1, 2], [0, 1, 1]]),
                                   grad=False, meta=False, flops=12 * 6 * 2),
}


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example(name):
    run_example(name, EXAMPLES[name])


def test_nms_bound_on_meta_and_thresholds():
    boxes, scores = rt.tensor(BOXES), rt.tensor(SCORES)
    assert non_max_suppression(boxes.to("meta"), scores.to("meta"), 2, 0.5).shape == (4, 3)
    kept = non_max_suppression(boxes, scores, 3, 0.5, score_threshold=0.4).tolist()
    assert kept == [[0, 0, 1], [0, 0, 2]]                   # class 1 scores all under 0.4
    assert non_max_suppression(boxes, scores, 3, 0.9).tolist()[:3] == [[0, 0, 1], [0, 0, 0], [0, 0, 2]]


def test_roi_align_against_torchvision():
    torch = pytest.importorskip("torch")
    ops = pytest.importorskip("torchvision.ops")
    x = randn(2, 3, 8, 9).astype(np.float32)
    rois = np.array([[0.5, 1.0, 6.0, 7.5], [2.0, 0.0, 8.0, 5.0], [1.0, 1.0, 1.5, 1.2]], dtype=np.float32)
    batch = np.array([1, 0, 1])
    boxes = torch.tensor(np.concatenate([batch[:, None].astype(np.float32), rois], 1))
    for aligned in (False, True):
        for ratio in (0, 2):
            ours = roi_align(rt.tensor(x), rt.tensor(rois), rt.tensor(batch), (3, 2), 0.5, ratio, "avg", aligned)
            theirs = ops.roi_align(torch.tensor(x), boxes, (3, 2), 0.5, ratio, aligned)
            np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-5, atol=1e-5)


def test_nms_against_onnxruntime():
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper

    rng = np.random.default_rng(0)
    corners = rng.uniform(0, 10, (2, 40, 2)).astype(np.float32)
    boxes = np.concatenate([corners, corners + rng.uniform(1, 4, (2, 40, 2)).astype(np.float32)], -1)
    scores = rng.uniform(0, 1, (2, 3, 40)).astype(np.float32)
    node = helper.make_node("NonMaxSuppression", ["boxes", "scores", "limit", "iou", "score"], ["kept"])
    limit, iou, score = np.array([7], np.int64), np.array([0.3], np.float32), np.array([0.2], np.float32)
    graph = helper.make_graph([node], "nms", [helper.make_tensor_value_info("boxes", TensorProto.FLOAT, boxes.shape),
                                              helper.make_tensor_value_info("scores", TensorProto.FLOAT, scores.shape)],
                              [helper.make_tensor_value_info("kept", TensorProto.INT64, None)],
                              [onnx.numpy_helper.from_array(a, n) for a, n in ((limit, "limit"), (iou, "iou"),
                                                                                (score, "score"))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    theirs = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"boxes": boxes, "scores": scores})[0]
    ours = non_max_suppression(rt.tensor(boxes), rt.tensor(scores), 7, 0.3, 0.2).numpy()
    assert ours.tolist() == theirs.tolist()
