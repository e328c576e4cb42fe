"""Layer ONNX ops: MatMul/Gemm/Einsum, Conv/ConvTranspose, normalizations, pooling, Softmax,
Dropout. They map onto the runtime's layer ops (``conv``, ``linear``, ``batch_norm``,
``max_pool``...) so an imported model is counted by the same rules as one written with
``rt.nn``; ONNX-only cases (asymmetric padding, opset differences) become an explicit ``pad``
or a short composite in front of the op.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from ... import dtypes as _dt
from ...dispatch import apply
from ...ops import activations as act
from ...ops import elementwise as ew
from ...ops import indexing, linalg, movement, norm, reduction
from ...ops.conv import Conv, ConvTranspose
from ...ops.pooling import AdaptiveAvgPool, AdaptiveMaxPool, AvgPool, MaxPool
from ..elem_types import to_dtype
from ._base import constant, converter


# --- matrix products ---------------------------------------------------------------------------

@converter("MatMul")
def matmul(ctx, a, b):
    return linalg.matmul(a, b)


@converter("Gemm")
def gemm(ctx, a, b, c=None):
    """alpha·A'·B' + beta·C: a ``linear`` (one op with its bias) when alpha = beta = 1 and C is a
    bias vector, else matmul, scale and add."""
    alpha, beta = ctx.attr("alpha", 1.0), ctx.attr("beta", 1.0)
    if ctx.attr("transA", 0):
        a = movement.transpose(a, 0, 1)
    trans_b = ctx.attr("transB", 0)
    n = b.shape[0] if trans_b else b.shape[1]
    if alpha == 1.0 and (c is None or (beta == 1.0 and c.numel() == n and c.shape[-1:] == (n,))):
        weight = b if trans_b else movement.transpose(b, 0, 1)
        bias = None if c is None else movement.reshape(c, (n,))
        return linalg.linear(a, weight, bias)
    y = linalg.matmul(a, movement.transpose(b, 0, 1) if trans_b else b)
    if alpha != 1.0:
        y = ew.mul(y, alpha)
    if c is not None:
        y = ew.add(y, c if beta == 1.0 else ew.mul(c, beta))
    return y


@converter("Einsum")
def einsum(ctx, *xs):
    return linalg.einsum(ctx.attr("equation"), *xs)


# --- convolutions ------------------------------------------------------------------------------

def _spatial(ctx, name: str, nd: int, default: int) -> tuple:
    values = ctx.attr(name)
    return tuple(int(v) for v in values) if values else (default,) * nd


def _pad_pairs(ctx, sizes: tuple, kernel: tuple, strides: tuple, dilations: tuple) -> list:
    """(begin, end) padding of each spatial dim from ``pads`` or ``auto_pad``."""
    auto_pad = ctx.attr("auto_pad", "NOTSET")
    nd = len(kernel)
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        pairs = []
        for n, k, s, d in zip(sizes, kernel, strides, dilations):
            total = max((-(-n // s) - 1) * s + (k - 1) * d + 1 - n, 0)  # output ceil(n / s)
            small = total // 2
            pairs.append((small, total - small) if auto_pad == "SAME_UPPER" else (total - small, small))
        return pairs
    if auto_pad == "VALID":
        return [(0, 0)] * nd
    if auto_pad != "NOTSET":
        raise ctx.unsupported(f"auto_pad {auto_pad!r} is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID")
    pads = [int(p) for p in ctx.attr("pads") or [0] * (2 * nd)]
    return list(zip(pads[:nd], pads[nd:]))


def _pad_spatial(x, pairs, value=0.0):
    """``x`` (N, C, *S) padded by ``pairs`` (one (begin, end) per spatial dim)."""
    return movement.pad(x, movement.pad_list(pairs), value=value)


def _conv_input(x, pairs, fits):
    """(x, padding): the op's own symmetric padding when ``fits`` allows it, else an explicit
    pad in front (ONNX allows asymmetric padding, the runtime's ops do not)."""
    if all(b == e for b, e in pairs) and fits(tuple(b for b, _ in pairs)):
        return x, tuple(b for b, _ in pairs)
    return _pad_spatial(x, pairs), (0,) * len(pairs)


@converter("Conv")
def conv(ctx, x, w, b=None):
    nd = w.ndim - 2
    kernel = tuple(w.shape[2:])
    strides, dilations = _spatial(ctx, "strides", nd, 1), _spatial(ctx, "dilations", nd, 1)
    pairs = _pad_pairs(ctx, x.shape[2:], kernel, strides, dilations)
    x, padding = _conv_input(x, pairs, lambda p: True)
    return apply(Conv, x, w, b, stride=strides, padding=padding, dilation=dilations,
                 groups=int(ctx.attr("group", 1)))


@converter("ConvTranspose")
def conv_transpose(ctx, x, w, b=None):
    nd = w.ndim - 2
    kernel = tuple(w.shape[2:])
    strides, dilations = _spatial(ctx, "strides", nd, 1), _spatial(ctx, "dilations", nd, 1)
    out_pad = _spatial(ctx, "output_padding", nd, 0)
    groups = int(ctx.attr("group", 1))
    auto_pad = ctx.attr("auto_pad", "NOTSET")
    full = [s * (n - 1) + op + (k - 1) * d + 1
            for n, s, op, k, d in zip(x.shape[2:], strides, out_pad, kernel, dilations)]
    target = ctx.attr("output_shape")
    if not target and auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        target = [n * s for n, s in zip(x.shape[2:], strides)]
    if target:
        pairs = []
        for f, o in zip(full, list(target)[-nd:]):
            total = f - int(o)
            half = total // 2
            pairs.append((half, total - half) if auto_pad == "SAME_UPPER" else (total - half, half))
    elif auto_pad == "VALID":
        pairs = [(0, 0)] * nd
    else:
        pairs = _pad_pairs(ctx, x.shape[2:], kernel, strides, dilations)
    symmetric = all(p == q >= 0 for p, q in pairs)
    valid_out_pad = all(op < s or op < d for op, s, d in zip(out_pad, strides, dilations))
    if symmetric and valid_out_pad:
        return apply(ConvTranspose, x, w, b, stride=strides, padding=tuple(p for p, _ in pairs),
                     output_padding=out_pad, dilation=dilations, groups=groups)
    # the unpadded result, then crop (negative pad) the begin padding and the end padding net
    # of output_padding, then the bias
    y = apply(ConvTranspose, x, w, None, stride=strides, padding=(0,) * nd, output_padding=(0,) * nd,
              dilation=dilations, groups=groups)
    y = _pad_spatial(y, [(-p, op - q) for (p, q), op in zip(pairs, out_pad)])
    if b is not None:
        y = ew.add(y, movement.reshape(b, (1, b.shape[0]) + (1,) * nd))
    return y


# --- normalization -----------------------------------------------------------------------------

@converter("BatchNormalization")
def batch_norm(ctx, x, scale, bias, mean, var, *_):
    eps = ctx.attr("epsilon", 1e-5)
    if not ctx.attr("training_mode", 0):
        return norm.batch_norm(x, mean, var, scale, bias, training=False, eps=eps)
    # training: the batch's statistics normalize, and the running ones come out updated
    dims = (0,) + tuple(range(2, x.ndim))
    batch_mean = reduction.mean(x, dims)
    centered = ew.sub(x, movement.reshape(batch_mean, (1, -1) + (1,) * (x.ndim - 2)))
    batch_var = reduction.mean(ew.mul(centered, centered), dims)
    y = norm.batch_norm(x, batch_mean, batch_var, scale, bias, training=False, eps=eps)
    momentum = float(ctx.attr("momentum", 0.9))
    running_mean = ew.add(ew.mul(mean, momentum), ew.mul(batch_mean, 1 - momentum))
    running_var = ew.add(ew.mul(var, momentum), ew.mul(batch_var, 1 - momentum))
    return y, running_mean, running_var


def _statistics(x, dims: tuple, eps: float, stash):
    """(mean, 1 / sqrt(var + eps)) over ``dims``, kept as size-1 dims, in ``stash``'s dtype:
    the extra outputs of LayerNormalization, computed only when the model reads them."""
    work = ew.cast(x, stash)
    mean = reduction.mean(work, dims, True)
    centered = ew.sub(work, mean)
    var = reduction.mean(ew.mul(centered, centered), dims, True)
    return mean, ew.rsqrt(ew.add(var, eps))


@converter("LayerNormalization")
def layer_norm(ctx, x, scale, bias=None):
    axis = ctx.axis(ctx.attr("axis", -1), x.ndim)
    shape = tuple(x.shape[axis:])
    eps = ctx.attr("epsilon", 1e-5)
    fits = all(t is None or tuple(t.shape) == shape for t in (scale, bias))
    if fits:
        y = norm.layer_norm(x, shape, scale, bias, eps)
    else:
        y = ew.mul(norm.layer_norm(x, shape, None, None, eps), scale)  # broadcastable affine
        y = y if bias is None else ew.add(y, bias)
    if not (ctx.output_used(1) or ctx.output_used(2)):
        return y
    stash = to_dtype(ctx.attr("stash_type", 1), f"{ctx.where}: attribute 'stash_type'")
    return (y,) + _statistics(x, tuple(range(axis, x.ndim)), eps, stash)


@converter("RMSNormalization")
def rms_norm(ctx, x, scale):
    axis = ctx.axis(ctx.attr("axis", -1), x.ndim)
    shape = tuple(x.shape[axis:])
    eps = ctx.attr("epsilon", 1e-5)
    if tuple(scale.shape) == shape:
        return norm.rms_norm(x, shape, scale, eps)
    return ew.mul(norm.rms_norm(x, shape, None, eps), scale)  # a scale that broadcasts


def _per_channel(t, channels: int, groups: int):
    """A per-group vector (num_groups,) repeated to one value per channel."""
    if t is None or t.shape == (channels,):
        return t
    per_group = movement.expand(movement.reshape(t, (groups, 1)), (groups, channels // groups))
    return movement.reshape(per_group, (channels,))


@converter("GroupNormalization")
def group_norm(ctx, x, scale, bias):
    groups = int(ctx.attr("num_groups"))
    channels = x.shape[1]
    if ctx.opset < 21:  # opset 18 gave scale and bias per group; 21 per channel
        scale, bias = _per_channel(scale, channels, groups), _per_channel(bias, channels, groups)
    return norm.group_norm(x, groups, scale, bias, ctx.attr("epsilon", 1e-5))


@converter("InstanceNormalization")
def instance_norm(ctx, x, scale, bias):
    return norm.group_norm(x, x.shape[1], scale, bias, ctx.attr("epsilon", 1e-5))


# --- pooling -----------------------------------------------------------------------------------

def _pool_geometry(ctx, x):
    kernel = tuple(int(k) for k in ctx.attr("kernel_shape"))
    nd = len(kernel)
    strides, dilations = _spatial(ctx, "strides", nd, 1), _spatial(ctx, "dilations", nd, 1)
    pairs = _pad_pairs(ctx, x.shape[2:], kernel, strides, dilations)
    return kernel, strides, dilations, pairs, bool(ctx.attr("ceil_mode", 0))


def _onnx_pool_out(sizes, kernel, strides, dilations, pairs, ceil_mode) -> tuple:
    """ONNX's pooled size: a last window that would start in the end padding is dropped."""
    out = []
    for n, k, s, d, (b, e) in zip(sizes, kernel, strides, dilations, pairs):
        room = n + b + e - d * (k - 1) - 1
        o = (-(-room // s) if ceil_mode else room // s) + 1
        if ceil_mode and (o - 1) * s >= n + b:
            o -= 1
        out.append(o)
    return tuple(out)


def _crop_to(y, out):
    for i, o in enumerate(out):
        if y.shape[2 + i] > o:
            y = movement.narrow(y, 2 + i, 0, o)
    return y


def _native_padding(pairs, kernel):
    """The op's own padding when the pads are symmetric and at most half the kernel."""
    if all(b == e and b <= k // 2 for (b, e), k in zip(pairs, kernel)):
        return tuple(b for b, _ in pairs)
    return None


def _window_slices(x, kernel, strides, dilations, pairs, out, fill=0.0):
    """One strided slice of the padded ``x`` per kernel position: the element each output's
    window reads there. The end is padded further (with ``fill``) where ceil_mode's last windows
    reach past the padding; ONNX leaves those positions out of the window."""
    spatial = x.shape[2:]
    reach = [(o - 1) * s + (k - 1) * d + 1 for o, s, k, d in zip(out, strides, kernel, dilations)]
    ends = [(b, e + max(r - (n + b + e), 0)) for r, n, (b, e) in zip(reach, spatial, pairs)]
    padded = _pad_spatial(x, ends, fill) if any(p != (0, 0) for p in ends) else x
    for offsets in itertools.product(*[range(k) for k in kernel]):
        key = tuple(slice(j * d, j * d + (o - 1) * s + 1, s) for j, d, o, s in zip(offsets, dilations, out, strides))
        yield indexing.getitem(padded, (slice(None), slice(None)) + key)


def _window_sum(x, kernel, strides, dilations, pairs, out):
    """The sum over every pooling window of the zero-padded ``x`` (any dilation)."""
    total = None
    for part in _window_slices(x, kernel, strides, dilations, pairs, out):
        total = part if total is None else ew.add(total, part)
    return total


def _window_mask(x, pairs, include_pad: bool):
    """1 where a window position counts (the input, and its padding with ``include_pad``)."""
    spatial = x.shape[2:]
    extent = [n + b + e for n, (b, e) in zip(spatial, pairs)]
    mask = np.zeros([1, 1] + extent, dtype=x.dtype.np)
    inner = tuple(slice(0, n) if include_pad else slice(b, b + m)
                  for n, m, (b, _) in zip(extent, spatial, pairs))
    mask[(0, 0) + inner] = 1
    return constant(mask)


def _max_pool_indices(ctx, x, kernel, strides, dilations, pairs, out):
    """MaxPool's Indices output: the flat position in ``x`` (N, C, *spatial; row-major, or
    column-major within a plane with ``storage_order``) of each window's first maximum."""
    spatial = x.shape[2:]
    flat = np.arange(int(np.prod(x.shape)), dtype=np.int64).reshape(x.shape)
    if ctx.attr("storage_order", 0):
        plane = np.arange(int(np.prod(spatial)), dtype=np.int64).reshape(spatial[::-1]).T
        flat = (np.arange(x.shape[0] * x.shape[1], dtype=np.int64).reshape(x.shape[:2] + (1,) * len(spatial))
                * int(np.prod(spatial)) + plane)
    lowest = -math.inf if x.dtype.is_floating_point else int(np.iinfo(x.dtype.np).min)
    best = index = None
    positions = _window_slices(constant(flat), kernel, strides, dilations, pairs, out, -1)
    for value, where_ in zip(_window_slices(x, kernel, strides, dilations, pairs, out, lowest), positions):
        if best is None:
            best, index = value, where_
            continue
        better = ew.gt(value, best)  # strictly: the first maximum in row-major order stays
        best, index = ew.where(better, value, best), ew.where(better, where_, index)
    return index


@converter("MaxPool")
def max_pool(ctx, x):
    kernel, strides, dilations, pairs, ceil_mode = _pool_geometry(ctx, x)
    if ctx.output_used(1):
        out = _onnx_pool_out(x.shape[2:], kernel, strides, dilations, pairs, ceil_mode)
        values = max_pool(_without_indices(ctx), x)
        return values, _max_pool_indices(ctx, x, kernel, strides, dilations, pairs, out)
    padding = _native_padding(pairs, kernel)
    if padding is not None:
        return apply(MaxPool, x, kernel_size=kernel, stride=strides, padding=padding, dilation=dilations,
                     ceil_mode=ceil_mode)
    lowest = -math.inf if x.dtype.is_floating_point else int(np.iinfo(x.dtype.np).min)
    y = apply(MaxPool, _pad_spatial(x, pairs, lowest), kernel_size=kernel, stride=strides,
              padding=(0,) * len(kernel), dilation=dilations, ceil_mode=ceil_mode)
    return _crop_to(y, _onnx_pool_out(x.shape[2:], kernel, strides, dilations, pairs, ceil_mode))


def _without_indices(ctx):
    from ._base import NodeContext

    return NodeContext(ctx.op_type, ctx.name, ctx.opset, ctx.attrs, 1, (True,), ctx.sources, ctx.subgraphs)


@converter("AveragePool")
def avg_pool(ctx, x):
    kernel, strides, dilations, pairs, ceil_mode = _pool_geometry(ctx, x)
    include_pad = bool(ctx.attr("count_include_pad", 0))
    if any(d != 1 for d in dilations):
        # no runtime pool dilates its windows: their sums, over the count of positions each holds
        out = _onnx_pool_out(x.shape[2:], kernel, strides, dilations, pairs, ceil_mode)
        count = _window_sum(_window_mask(x, pairs, include_pad), kernel, strides, dilations, pairs, out)
        return ew.div(_window_sum(x, kernel, strides, dilations, pairs, out), count)
    padding = _native_padding(pairs, kernel)
    geometry = dict(kernel_size=kernel, stride=strides, ceil_mode=ceil_mode, divisor_override=None)
    if padding is not None:
        return apply(AvgPool, x, padding=padding, count_include_pad=include_pad, **geometry)
    nd = len(kernel)
    out = _onnx_pool_out(x.shape[2:], kernel, strides, dilations, pairs, ceil_mode)
    pooled = _crop_to(apply(AvgPool, _pad_spatial(x, pairs), padding=(0,) * nd, count_include_pad=True,
                            **geometry), out)
    if include_pad:
        return pooled
    # divide by the share of real (unpadded) elements of each window: the same pooling of a
    # constant mask, which folds at import
    mask = constant(np.ones((1, 1) + tuple(x.shape[2:]), dtype=x.dtype.np))
    share = apply(AvgPool, _pad_spatial(mask, pairs), padding=(0,) * nd, count_include_pad=True, **geometry)
    return ew.div(pooled, _crop_to(share, out))


@converter("MaxUnpool")
def max_unpool(ctx, x, indices, output_shape=None):
    """Each value written at its flat index (MaxPool's Indices) in zeros of the unpooled shape;
    a larger ``output_shape`` pads that at the end of each dim."""
    from ...ops.scatter import scatter_elements

    kernel = tuple(int(k) for k in ctx.attr("kernel_shape"))
    nd = len(kernel)
    strides = _spatial(ctx, "strides", nd, 1)
    pads = [int(p) for p in ctx.attr("pads") or [0] * (2 * nd)]
    shape = tuple(x.shape[:2]) + tuple((n - 1) * s + k - pads[i] - pads[i + nd]
                                       for i, (n, s, k) in enumerate(zip(x.shape[2:], strides, kernel)))
    zeros = constant(np.zeros(int(np.prod(shape)), dtype=x.dtype.np))
    flat = scatter_elements(zeros, 0, movement.reshape(ew.cast(indices, _dt.int64), (-1,)),
                            movement.reshape(x, (-1,)))
    y = movement.reshape(flat, shape)
    wanted = ctx.ints(output_shape, "input 'output_shape'")
    if wanted is not None and tuple(wanted) != shape:
        y = _pad_spatial(y, [(0, w - n) for w, n in zip(wanted[2:], shape[2:])])
    return y


@converter("LpPool")
def lp_pool(ctx, x):
    """(Σ |x|ᵖ over each window)^(1/p), padding counting as zeros."""
    kernel, strides, dilations, pairs, ceil_mode = _pool_geometry(ctx, x)
    p = float(ctx.attr("p", 2))
    out = _onnx_pool_out(x.shape[2:], kernel, strides, dilations, pairs, ceil_mode)
    powered = ew.mul(x, x) if p == 2 else ew.pow(ew.abs(x), p)
    total = _window_sum(powered, kernel, strides, dilations, pairs, out)
    return ew.sqrt(total) if p == 2 else ew.pow(total, 1.0 / p)


@converter("GlobalLpPool")
def global_lp_pool(ctx, x):
    p = float(ctx.attr("p", 2))
    dims = tuple(range(2, x.ndim))
    total = reduction.sum(ew.pow(ew.abs(x), p), dims, True)
    return ew.pow(total, 1.0 / p)


@converter("LRN")
def lrn(ctx, x):
    """x / (bias + alpha / size · Σ x² over ``size`` neighbouring channels)^beta."""
    size = int(ctx.attr("size"))
    alpha, beta, bias = float(ctx.attr("alpha", 1e-4)), float(ctx.attr("beta", 0.75)), float(ctx.attr("bias", 1.0))
    before, after = (size - 1) // 2, size - 1 - (size - 1) // 2
    channels = x.shape[1]
    squares = ew.mul(x, x)
    pairs = [0, 0] * (x.ndim - 2) + [before, after]  # F.pad order: last dim first, channels last
    padded = movement.pad(squares, pairs)
    total = None
    for k in range(size):
        part = movement.narrow(padded, 1, k, channels)
        total = part if total is None else ew.add(total, part)
    return ew.div(x, ew.pow(ew.add(ew.mul(total, alpha / size), bias), beta))


@converter("LpNormalization")
def lp_normalization(ctx, x):
    axis = ctx.axis(ctx.attr("axis", -1), x.ndim)
    p = int(ctx.attr("p", 2))
    if p == 1:
        norms = reduction.sum(ew.abs(x), axis, True)
    elif p == 2:
        norms = ew.sqrt(reduction.sum(ew.mul(x, x), axis, True))
    else:
        raise ctx.unsupported(f"p={p} (ONNX defines 1 and 2)")
    return ew.div(x, ew.where(ew.eq(norms, 0), constant(np.array(1, x.dtype.np)), norms))  # zeros stay 0


@converter("MeanVarianceNormalization")
def mean_variance_normalization(ctx, x):
    dims = ctx.axes(ctx.attr("axes", [0, 2, 3]), x.ndim)
    centered = ew.sub(x, reduction.mean(x, dims, True))
    variance = reduction.mean(ew.mul(centered, centered), dims, True)
    return ew.div(centered, ew.add(ew.sqrt(variance), 1e-9))


@converter("GlobalAveragePool", "GlobalMaxPool")
def global_pool(ctx, x):
    op = AdaptiveAvgPool if ctx.op_type == "GlobalAveragePool" else AdaptiveMaxPool
    return apply(op, x, output_size=(1,) * (x.ndim - 2))


# --- softmax, dropout --------------------------------------------------------------------------

@converter("Softmax", "LogSoftmax")
def softmax(ctx, x):
    fn = act.softmax if ctx.op_type == "Softmax" else act.log_softmax
    if ctx.opset >= 13:
        return fn(x, ctx.axis(ctx.attr("axis", -1), x.ndim))
    # before opset 13 the input was coerced to 2-d at ``axis`` (default 1, in [-ndim, ndim])
    axis = ctx.attr("axis", 1)
    axis = axis + x.ndim if axis < 0 else axis
    rows = math.prod(x.shape[:axis])
    y = fn(movement.reshape(x, (rows, x.numel() // max(rows, 1))), 1)
    return movement.reshape(y, x.shape)


@converter("Dropout")
def dropout(ctx, x, ratio=None, training_mode=None):
    training = training_mode is not None and ctx.scalar(training_mode, "input 'training_mode'")
    if training and (ratio is None or ctx.scalar(ratio, "input 'ratio'") != 0):
        raise ctx.unsupported("training_mode=True with a ratio above 0 drops random elements; export the model "
                              "in eval mode")
    if ctx.output_used(1):  # inference: nothing is dropped, the mask is all True
        return x, constant(np.ones(x.shape, dtype=bool))
    return x


@converter("Identity")
def identity(ctx, x):
    return x
