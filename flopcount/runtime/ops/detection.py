"""Detection heads: ``roi_align`` (bilinear samples averaged, or maxed, per bin of each region)
and ``non_max_suppression`` (greedy selection of the best-scoring boxes per class).

``non_max_suppression`` keeps a number of boxes that depends on the values: its shape rule gives
the exact count when the inputs hold data and an upper bound on meta (every class keeps
``max_output_boxes_per_class`` boxes), as ``nonzero`` does.

Cost (COUNTING.md): roi_align 8 FLOPs per bilinear sample (4 multiplies, 4 adds) and a divide
per output, with sampling_ratio² samples per bin (2×2 when the ratio adapts to the region's
size, torchvision's usual case); non_max_suppression 12 FLOPs per intersection-over-union, at
most one per candidate and kept box.
"""

from __future__ import annotations

__all__ = ["roi_align", "non_max_suppression"]

import math

import numpy as np

from .. import dtypes as _dt
from ..dispatch import apply
from ..errors import ShapeError
from ..registry import Op, Spec, io_cost, numel, register_op
from ._helpers import check_float, upcast_half


def _bilinear(xp, plane, y, x, height: int, width: int):
    """The four taps of bilinear sampling at (y, x) (arrays of one shape) in ``plane`` (C, H, W):
    [(values (..., C), weights (...))]; samples beyond one pixel outside the map read nothing."""
    gone = (y < -1.0) | (y > height) | (x < -1.0) | (x > width)
    y, x = xp.maximum(y, 0), xp.maximum(x, 0)
    y0, x0 = y.astype(np.int64), x.astype(np.int64)
    top_y, top_x = y0 >= height - 1, x0 >= width - 1
    y0, x0 = xp.where(top_y, height - 1, y0), xp.where(top_x, width - 1, x0)
    y1, x1 = xp.where(top_y, height - 1, y0 + 1), xp.where(top_x, width - 1, x0 + 1)
    y, x = xp.where(top_y, y0, y), xp.where(top_x, x0, x)
    ly, lx = y - y0, x - x0
    hy, hx = 1 - ly, 1 - lx
    taps = [(y0, x0, hy * hx), (y0, x1, hy * lx), (y1, x0, ly * hx), (y1, x1, ly * lx)]
    return [(plane[:, yi, xi], xp.where(gone, 0, w)) for yi, xi, w in taps]


@register_op("roi_align")
class RoiAlign(Op):
    """Each region (x1, y1, x2, y2)·spatial_scale of image ``batch_indices[r]`` pooled to
    (output_height, output_width) bins of bilinear samples (ONNX's RoiAlign)."""

    def shape(x, rois, batch_indices, *, output_size, spatial_scale, sampling_ratio, mode, aligned):
        check_float("roi_align", x)
        if x.ndim != 4 or rois.ndim != 2 or rois.shape[1] != 4 or tuple(batch_indices.shape) != (rois.shape[0],):
            raise ShapeError(f"roi_align: expects x (N, C, H, W), rois (R, 4), batch_indices (R,), got {x.shape}, "
                             f"{rois.shape}, {batch_indices.shape}")
        if mode not in ("avg", "max"):
            raise ShapeError(f"roi_align: mode must be 'avg' or 'max', got {mode!r}")
        return Spec((rois.shape[0], x.shape[1]) + tuple(output_size), x.dtype, x.device)

    def forward(xp, x, rois, batch_indices, *, output_size, spatial_scale, sampling_ratio, mode, aligned):
        work = upcast_half(x)
        height, width = x.shape[2:]
        out_h, out_w = output_size
        out = xp.zeros((rois.shape[0], x.shape[1], out_h, out_w), dtype=work.dtype)
        offset = 0.5 if aligned else 0.0
        for r in range(rois.shape[0]):
            x1, y1, x2, y2 = (float(v) * spatial_scale - offset for v in rois[r])
            roi_w, roi_h = x2 - x1, y2 - y1
            if not aligned:  # malformed regions become 1x1
                roi_w, roi_h = max(roi_w, 1.0), max(roi_h, 1.0)
            bin_h, bin_w = roi_h / out_h, roi_w / out_w
            grid_h = int(sampling_ratio) if sampling_ratio > 0 else int(math.ceil(roi_h / out_h))
            grid_w = int(sampling_ratio) if sampling_ratio > 0 else int(math.ceil(roi_w / out_w))
            ys = y1 + xp.arange(out_h)[:, None] * bin_h + (xp.arange(grid_h)[None, :] + 0.5) * bin_h / grid_h
            xs = x1 + xp.arange(out_w)[:, None] * bin_w + (xp.arange(grid_w)[None, :] + 0.5) * bin_w / grid_w
            y = xp.broadcast_to(ys[:, None, :, None], (out_h, out_w, grid_h, grid_w))
            xx = xp.broadcast_to(xs[None, :, None, :], (out_h, out_w, grid_h, grid_w))
            taps = _bilinear(xp, work[int(batch_indices[r])], y, xx, height, width)
            if mode == "avg":
                total = sum(values * w for values, w in taps)  # (C, out_h, out_w, gh, gw)
                pooled = total.sum(axis=(-2, -1)) / max(grid_h * grid_w, 1)
            else:  # ONNX's max: the largest weighted tap of any sample in the bin
                best = None
                for values, w in taps:
                    term = values * w
                    best = term if best is None else xp.maximum(best, term)
                pooled = best.max(axis=(-2, -1)) if grid_h * grid_w else xp.zeros(best.shape[:3], best.dtype)
            out[r] = pooled
        return out.astype(x.dtype, copy=False)

    vjp = None  # inference-only here: detection heads are imported from files, not trained

    def cost(out, x, rois, batch_indices, *, output_size, spatial_scale, sampling_ratio, mode, aligned):
        samples = sampling_ratio ** 2 if sampling_ratio > 0 else 4
        return io_cost(out, (x, rois, batch_indices), flops=numel(out) * (8 * samples + 1))


def _iou_suppresses(box, kept, center_point_box: bool, threshold: float) -> bool:
    """Whether ``box`` overlaps any of ``kept`` (k, 4) by more than ``threshold`` (ONNX's rule:
    boxes with no area never suppress)."""
    if not len(kept):
        return False
    if center_point_box:
        a = np.array([box[0] - box[2] / 2, box[1] - box[3] / 2, box[0] + box[2] / 2, box[1] + box[3] / 2])
        b = np.stack([kept[:, 0] - kept[:, 2] / 2, kept[:, 1] - kept[:, 3] / 2,
                      kept[:, 0] + kept[:, 2] / 2, kept[:, 1] + kept[:, 3] / 2], axis=1)
        ax0, ay0, ax1, ay1 = a
        bx0, by0, bx1, by1 = b.T
    else:  # [y1, x1, y2, x2], corners in either order
        ay0, ay1 = sorted((box[0], box[2]))
        ax0, ax1 = sorted((box[1], box[3]))
        by0, by1 = np.minimum(kept[:, 0], kept[:, 2]), np.maximum(kept[:, 0], kept[:, 2])
        bx0, bx1 = np.minimum(kept[:, 1], kept[:, 3]), np.maximum(kept[:, 1], kept[:, 3])
    iw = np.minimum(ax1, bx1) - np.maximum(ax0, bx0)
    ih = np.minimum(ay1, by1) - np.maximum(ay0, by0)
    inter = np.where((iw > 0) & (ih > 0), iw * ih, 0.0)
    area_a, area_b = (ax1 - ax0) * (ay1 - ay0), (bx1 - bx0) * (by1 - by0)
    union = area_a + area_b - inter
    valid = (inter > 0) & (area_a > 0) & (area_b > 0) & (union > 0)
    return bool(np.any(valid & (inter / np.where(union > 0, union, 1) > threshold)))


def _select(boxes: np.ndarray, scores: np.ndarray, max_per_class: int, iou: float, score, center: bool) -> np.ndarray:
    found = []
    for b in range(scores.shape[0]):
        for c in range(scores.shape[1]):
            s = scores[b, c]
            candidates = np.arange(len(s)) if score is None else np.nonzero(s > score)[0]
            order = candidates[np.argsort(-s[candidates], kind="stable")]  # ties: the lower index first
            kept: list = []
            for i in order:
                if len(kept) >= max_per_class:
                    break
                if not _iou_suppresses(boxes[b, i], boxes[b, kept], center, iou):
                    kept.append(i)
                    found.append((b, c, i))
    return np.array(found, dtype=np.int64).reshape(-1, 3)


@register_op("non_max_suppression")
class NonMaxSuppression(Op):
    """(selected, 3) rows [batch, class, box] of boxes (N, B, 4) kept per class by score
    (N, classes, B), greedily, dropping those that overlap a kept one by more than iou_threshold."""

    vjp = None  # a selection of indices

    def shape(boxes, scores, *, max_output_boxes_per_class, iou_threshold, score_threshold, center_point_box):
        if boxes.ndim != 3 or boxes.shape[2] != 4 or scores.ndim != 3 or scores.shape[0] != boxes.shape[0] \
                or scores.shape[2] != boxes.shape[1]:
            raise ShapeError(f"non_max_suppression: boxes {boxes.shape} and scores {scores.shape} should be "
                             f"(N, B, 4) and (N, classes, B)")
        if getattr(boxes, "data", None) is not None and getattr(scores, "data", None) is not None:
            count = len(_select(*_host(boxes, scores), max_output_boxes_per_class, iou_threshold, score_threshold,
                                center_point_box))
        else:
            count = scores.shape[0] * scores.shape[1] * min(max_output_boxes_per_class, boxes.shape[1])
        return Spec((count, 3), _dt.int64, boxes.device)

    def forward(xp, boxes, scores, *, max_output_boxes_per_class, iou_threshold, score_threshold, center_point_box):
        host_boxes = boxes if xp is np else boxes.get()
        host_scores = scores if xp is np else scores.get()
        found = _select(host_boxes, host_scores, max_output_boxes_per_class, iou_threshold, score_threshold,
                        center_point_box)
        return xp.asarray(found)

    def cost(out, boxes, scores, *, max_output_boxes_per_class, iou_threshold, score_threshold, center_point_box):
        candidates = numel(scores)
        return io_cost(out, (boxes, scores), flops=12 * candidates * min(max_output_boxes_per_class, boxes.shape[1]))


def _host(boxes, scores) -> tuple:
    def array(t):
        return np.asarray(t.data) if t.device.type == "cpu" else t.data.get()

    return array(boxes), array(scores)


def roi_align(input, rois, batch_indices, output_size, spatial_scale: float = 1.0, sampling_ratio: int = 0,
              mode: str = "avg", aligned: bool = False):
    """Pool every region of interest to ``output_size`` bins of bilinear samples.

    >>> x = rt.arange(16.0).reshape(1, 1, 4, 4)
    >>> roi_align(x, rt.tensor([[0.0, 0.0, 2.0, 2.0]]), rt.tensor([0]), (1, 1), aligned=True).tolist()
    [[[[5.0]]]]
    """
    return apply(RoiAlign, input, rois, batch_indices, output_size=tuple(int(s) for s in output_size),
                 spatial_scale=float(spatial_scale), sampling_ratio=int(sampling_ratio), mode=mode, aligned=bool(aligned))


def non_max_suppression(boxes, scores, max_output_boxes_per_class: int, iou_threshold: float = 0.0,
                        score_threshold: float | None = None, center_point_box: bool = False):
    """Indices [batch, class, box] of the boxes kept per class (ONNX's NonMaxSuppression).

    >>> boxes = rt.tensor([[[0.0, 0.0, 1.0, 1.0], [0.0, 0.1, 1.0, 1.1], [0.0, 2.0, 1.0, 3.0]]])
    >>> scores = rt.tensor([[[0.9, 0.8, 0.7]]])
    >>> non_max_suppression(boxes, scores, 3, 0.5).tolist()
    [[0, 0, 0], [0, 0, 2]]
    """
    return apply(NonMaxSuppression, boxes, scores, max_output_boxes_per_class=int(max_output_boxes_per_class),
                 iou_threshold=float(iou_threshold), score_threshold=None if score_threshold is None
                 else float(score_threshold), center_point_box=bool(center_point_box))
