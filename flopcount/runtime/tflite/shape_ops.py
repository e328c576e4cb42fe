"""TFLite ops that select and rearrange (SLICE, STRIDED_SLICE, SPLIT, PACK, UNPACK, GATHER) and
TRANSPOSE_CONV, registered in ``converters.CONVERTERS``. Bounds, axes and indices are constants
of the file; slicing reuses ONNX's Slice (its clamping rules are TensorFlow's), the transposed
conv ONNX's ConvTranspose between NHWC<->NCHW permutes. These pick values, so a quantized
tensor keeps its scale through them (TFLite requires the same scale in and out).
"""

from __future__ import annotations

import numpy as np

from ..errors import UnsupportedOpError
from ..onnx.converters._base import constant
from ..onnx.converters.nn import conv_transpose
from ..onnx.converters.tensor import slice_
from ..ops import indexing, movement
from . import quantized as q
from .converters import _TO_NCHW, _TO_NHWC, _activated, _padding, converter

_BIG = 2 ** 62  # an end past any dim: ONNX's Slice clamps it, as TensorFlow's masks ask


def _const(t, what: str) -> np.ndarray:
    if t is None or t.data is None:
        raise ValueError(f"{what} is not a constant of the file")
    return np.asarray(t.data).reshape(-1)


def _slice(ctx, x, begin, end, strides):
    axes = list(range(len(begin)))
    return slice_(ctx.onnx(), x, constant(np.array(begin, np.int64)), constant(np.array(end, np.int64)),
                  constant(np.array(axes, np.int64)), constant(np.array(strides, np.int64)))


@converter("SLICE")
def slice_op(ctx, x, begin, size):
    starts, sizes = _const(begin, "begin"), _const(size, "size")
    ends = [int(x.shape[i]) if int(n) == -1 else int(b) + int(n) for i, (b, n) in enumerate(zip(starts, sizes))]
    return _slice(ctx, x, [int(b) for b in starts], ends, [1] * len(ends))


@converter("STRIDED_SLICE")
def strided_slice(ctx, x, begin, end, strides=None):
    if ctx.option("EllipsisMask", 0) or ctx.option("NewAxisMask", 0):
        raise UnsupportedOpError(f"{ctx.where}: ellipsis_mask and new_axis_mask are not supported")
    begins, ends = [int(v) for v in _const(begin, "begin")], [int(v) for v in _const(end, "end")]
    steps = [int(v) for v in _const(strides, "strides")] if strides is not None else [1] * len(begins)
    begin_mask, end_mask = ctx.option("BeginMask", 0), ctx.option("EndMask", 0)
    shrink = ctx.option("ShrinkAxisMask", 0)
    for i, step in enumerate(steps):
        if shrink >> i & 1:  # one index, the dim dropped (the declared output shape drops it)
            begins[i] = begins[i] % x.shape[i] if x.shape[i] else 0
            ends[i], steps[i] = begins[i] + 1, 1
            continue
        if begin_mask >> i & 1:
            begins[i] = 0 if step > 0 else _BIG
        if end_mask >> i & 1:
            ends[i] = _BIG if step > 0 else -_BIG
    return movement.reshape(_slice(ctx, x, begins, ends, steps), ctx.out.shape)


@converter("SPLIT")
def split(ctx, axis, x):
    dim = int(_const(axis, "axis")[0]) % x.ndim
    return tuple(movement.split(x, x.shape[dim] // len(ctx.outs), dim=dim))


@converter("PACK")
def pack(ctx, *xs):
    return movement.stack(list(xs), dim=ctx.option("Axis", 0) % (xs[0].ndim + 1))


@converter("UNPACK")
def unpack(ctx, x):
    return tuple(movement.unbind(x, dim=ctx.option("Axis", 0) % x.ndim))


@converter("GATHER")
def gather(ctx, x, indices):
    dim = ctx.option("Axis", 0) % x.ndim
    if ctx.option("BatchDims", 0):
        raise UnsupportedOpError(f"{ctx.where}: batch_dims is not supported")
    flat = indexing.index_select(x, dim, movement.reshape(indices, (-1,)))
    return movement.reshape(flat, ctx.out.shape)


@converter("TRANSPOSE_CONV")
def transpose_conv(ctx, output_shape, w, x, bias=None):
    if q.is_quantized(ctx.ins[2]):  # inputs: output shape, weights, data
        raise UnsupportedOpError(f"{ctx.where}: a quantized TRANSPOSE_CONV is not supported")
    # weights (Cout, H, W, Cin) -> ConvTranspose's (Cin, Cout, H, W); the file gives the output size
    attrs = {"strides": [ctx.option("StrideH", 1), ctx.option("StrideW", 1)], "auto_pad": _padding(ctx),
             "output_shape": [int(d) for d in ctx.out.shape[1:3]]}
    y = conv_transpose(ctx.onnx(**attrs), movement.permute(x, _TO_NCHW), movement.permute(w, (3, 0, 1, 2)), bias)
    return _activated(ctx, movement.permute(y, _TO_NHWC))
