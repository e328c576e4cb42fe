"""QuantizeLinear and DequantizeLinear: the QDQ format that quantization tools (onnxruntime's
``quantize_static``, TensorRT's) write around each quantized op. Each is the arithmetic it
stands for in runtime ops: ``saturate(round(x / scale) + zero_point)`` and
``(x - zero_point) * scale``, with a scale per tensor or per channel along ``axis``. Blocked
quantization (opset 21's ``block_size``) is not converted.
"""

from __future__ import annotations

import numpy as np

from ... import dtypes as _dt
from ...ops import elementwise as ew
from ._base import converter


def _along(ctx, t, ndim: int):
    """A per-channel scale or zero point (1-d) shaped to broadcast along ``axis`` of an
    ``ndim``-d input; a per-tensor one (0-d or one element) as it is."""
    if t is None or t.ndim == 0 or t.numel() == 1 or ndim <= 1:
        return t
    if ctx.attr("block_size", 0):
        raise ctx.unsupported("blocked quantization (block_size) is not converted")
    axis = ctx.axis(ctx.attr("axis", 1), ndim)
    shape = [1] * ndim
    shape[axis] = t.shape[0]
    return t.reshape(*shape)


@converter("QuantizeLinear")
def quantize_linear(ctx, x, scale, zero_point=None):
    dtype = zero_point.dtype if zero_point is not None else _dt.uint8
    info = np.iinfo(dtype.name)
    q = ew.round(ew.div(x, _along(ctx, scale, x.ndim)))  # halves to even, as ONNX rounds
    if zero_point is not None:
        q = ew.add(q, ew.cast(_along(ctx, zero_point, x.ndim), q.dtype))
    return ew.cast(ew.clamp(q, int(info.min), int(info.max)), dtype)


@converter("DequantizeLinear")
def dequantize_linear(ctx, x, scale, zero_point=None):
    wide = ew.cast(x, scale.dtype)
    if zero_point is not None:
        wide = ew.sub(wide, ew.cast(_along(ctx, zero_point, x.ndim), scale.dtype))
    return ew.mul(wide, _along(ctx, scale, x.ndim))
