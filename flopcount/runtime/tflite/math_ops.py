"""More TFLite builtin ops, registered in ``converters.CONVERTERS``: elementwise math,
reductions, TRANSPOSE, BATCH_MATMUL and the resizes (ONNX's Resize on the NHWC data, which
resizes whichever dims change). Quantized inputs run dequantized and are quantized again to the
output (``_float_then_quantized``), like the other non-GEMM ops.
"""

from __future__ import annotations

import numpy as np

from ..onnx.converters._base import constant
from ..onnx.converters.resize import resize
from ..ops import activations as act
from ..ops import elementwise as ew
from ..ops import linalg, movement, reduction
from .converters import _activated, _float_then_quantized, _unary, converter


def _binary(fn, fused: bool = False):
    def convert(ctx, a, b):
        y = fn(a, b)
        return _activated(ctx, y) if fused else y

    return _float_then_quantized(convert)


converter("DIV")(_binary(ew.div, fused=True))
converter("MAXIMUM")(_binary(ew.maximum))
converter("MINIMUM")(_binary(ew.minimum))
converter("SQUARED_DIFFERENCE")(_binary(lambda a, b: ew.mul(ew.sub(a, b), ew.sub(a, b))))
converter("POW")(_binary(ew.pow))


for _name, _fn in {"EXP": ew.exp, "LOG": ew.log, "SQRT": ew.sqrt, "RSQRT": ew.rsqrt, "ABS": ew.abs,
                   "NEG": ew.neg, "SQUARE": lambda x: ew.mul(x, x), "SIN": ew.sin, "COS": ew.cos,
                   "FLOOR": ew.floor}.items():
    converter(_name)(_unary(_fn))


@converter("LEAKY_RELU")
@_float_then_quantized
def leaky_relu(ctx, x):
    return act.leaky_relu(x, float(ctx.option("Alpha", 0.2)))


@converter("PRELU")
@_float_then_quantized
def prelu(ctx, x, alpha):
    # alpha broadcasts against x (one per channel, last): max(x, 0) + alpha * min(x, 0)
    return ew.add(ew.maximum(x, 0.0), ew.mul(alpha, ew.minimum(x, 0.0)))


@converter("GELU")
@_float_then_quantized
def gelu(ctx, x):
    return act.gelu(x, "tanh" if ctx.option("Approximate", False) else "none")


@converter("LOG_SOFTMAX")
@_float_then_quantized
def log_softmax(ctx, x):
    return act.log_softmax(x, dim=-1)


def _reducer(fn):
    @_float_then_quantized
    def convert(ctx, x, axes):
        if axes.data is None:
            raise ValueError("the axes are not a constant of the file")
        dims = tuple(sorted({int(a) % x.ndim for a in np.asarray(axes.data).reshape(-1)}))
        return fn(x, dims, keepdim=bool(ctx.option("KeepDims", False)))

    return convert


converter("MEAN")(_reducer(reduction.mean))
converter("SUM")(_reducer(reduction.sum))
converter("REDUCE_MAX")(_reducer(reduction.amax))
converter("REDUCE_MIN")(_reducer(reduction.amin))


@converter("TRANSPOSE")
def transpose(ctx, x, perm):
    if perm.data is None:
        raise ValueError("the permutation is not a constant of the file")
    return movement.permute(x, tuple(int(p) for p in np.asarray(perm.data).reshape(-1)))


@converter("BATCH_MATMUL")
@_float_then_quantized
def batch_matmul(ctx, a, b):
    if ctx.option("AdjX", False):
        a = movement.transpose(a, -1, -2)
    if ctx.option("AdjY", False):
        b = movement.transpose(b, -1, -2)
    return linalg.matmul(a, b)


def _resize(ctx, x, mode: str):
    align, half = bool(ctx.option("AlignCorners", False)), bool(ctx.option("HalfPixelCenters", False))
    if mode == "linear":
        transform, nearest = ("align_corners" if align else "half_pixel" if half else "asymmetric"), "floor"
    else:  # TFLite: floor((x + 0.5) * scale) with half pixel centers, round (half away) with aligned corners
        transform = "align_corners" if align else "tf_half_pixel_for_nn" if half else "asymmetric"
        nearest = "round_prefer_ceil" if align else "floor"
    onnx_ctx = ctx.onnx(mode=mode, coordinate_transformation_mode=transform, nearest_mode=nearest)
    return resize(onnx_ctx, x, None, None, constant(np.array(ctx.out.shape, np.int64)))


@converter("RESIZE_BILINEAR")
@_float_then_quantized
def resize_bilinear(ctx, x, _size=None):
    return _resize(ctx, x, "linear")


@converter("RESIZE_NEAREST_NEIGHBOR")
def resize_nearest(ctx, x, _size=None):
    return _resize(ctx, x, "nearest")  # picks values: a quantized tensor keeps its scale
