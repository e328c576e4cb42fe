"""Detection ops: NonMaxSuppression and RoiAlign.

NonMaxSuppression keeps a number of boxes that depends on the scores: counted on meta at its
upper bound (``max_output_boxes_per_class`` per class), exact when run. Its thresholds and the
count per class must be known when the graph is built (constants, or bound input values).
"""

from __future__ import annotations

from ... import dtypes as _dt
from ...ops import elementwise as ew
from ...ops.detection import non_max_suppression, roi_align
from ._base import converter


@converter("NonMaxSuppression")
def nms(ctx, boxes, scores, max_output=None, iou=None, score=None):
    limit = ctx.scalar(max_output, "input 'max_output_boxes_per_class'")
    threshold = ctx.scalar(iou, "input 'iou_threshold'")
    minimum = ctx.scalar(score, "input 'score_threshold'")
    return non_max_suppression(boxes, scores, max(int(limit or 0), 0), float(threshold or 0.0),
                               None if minimum is None else float(minimum), bool(ctx.attr("center_point_box", 0)))


@converter("RoiAlign")
def roi_align_(ctx, x, rois, batch_indices):
    aligned = ctx.opset >= 16 and ctx.attr("coordinate_transformation_mode", "half_pixel") == "half_pixel"
    return roi_align(x, ew.cast(rois, x.dtype), ew.cast(batch_indices, _dt.int64),
                     (int(ctx.attr("output_height", 1)), int(ctx.attr("output_width", 1))),
                     float(ctx.attr("spatial_scale", 1.0)), int(ctx.attr("sampling_ratio", 0)),
                     ctx.attr("mode", "avg"), aligned)
