"""Emitters of upsampling: ONNX Resize with the coordinate rules of each runtime op."""

from __future__ import annotations

import numpy as np

from ._base import emitter


def _resize_sizes(b, node) -> str:
    x = node.inputs[0]
    return b.ints(tuple(x.shape[:2]) + tuple(node.attrs["output_size"]))


def _resize_scales(b, node):
    scales = node.attrs["scales"]
    return None if scales is None else b.const(np.array([1.0, 1.0] + list(scales), np.float32), "scales")


@emitter("upsample_nearest")
def upsample_nearest(b, node, ins, outs):
    # PyTorch's nearest is floor(dst·in/out); nearest-exact is floor((dst + 0.5)·in/out)
    exact = node.attrs["exact"]
    scales = _resize_scales(b, node)
    b.add("Resize", [ins[0], None, scales, None if scales else _resize_sizes(b, node)], outs, mode="nearest",
          coordinate_transformation_mode="half_pixel" if exact else "asymmetric",
          nearest_mode="round_prefer_ceil" if exact else "floor")


@emitter("upsample_bilinear")
def upsample_bilinear(b, node, ins, outs):
    align = node.attrs["align_corners"]
    scales = None if align else _resize_scales(b, node)
    b.add("Resize", [ins[0], None, scales, None if scales else _resize_sizes(b, node)], outs, mode="linear",
          coordinate_transformation_mode="align_corners" if align else "half_pixel")
