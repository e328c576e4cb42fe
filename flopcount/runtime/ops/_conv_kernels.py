"""Convolution kernels on arrays (numpy or CuPy): im2col into one BLAS matmul per image chunk.

Layouts: x (N, C, *S), conv weight (Cout, C/g, *K), transposed-conv weight (Cin, Cout/g, *K).
The column buffer is (N, g, C/g·prod(K), prod(O)) so that ``weight (g, Cout/g, C/g·prod(K)) @
cols`` writes the output directly in (N, Cout, *O) order, with no transpose afterwards.
On numpy arrays, 3x3 stride-1 convs with enough output run by Winograd's algorithm instead
(``_winograd.py``), with 16/36 of the multiply-adds, and float32 2-d convs of inputs with at most
four channels (stems) by the compiled kernel of ``cpu_kernels._narrow_conv``, without columns. Depthwise convolutions (one input channel per group) skip the column buffer: on numpy arrays
they run the compiled kernel of ``cpu_kernels`` where numba is there (register blocks of output
rows on float32, passes over the wide grid otherwise), else a multiply-add per kernel position, which is still
cheaper than a stack of 1-wide matmuls.

Where the windows are stride 1 or cover every stride phase, columns are built on the wide grid
of ``FlatWindows`` (one contiguous copy per kernel position instead of a copy per output row)
and the output is cropped once; this costs GEMM work on the grid's extra columns, so it is
used where they add at most ``WIDE_RATIO - 1`` (a 3x3 conv on 56x56: 58/56). The transposed
conv scatters its columns on the same grid. Depthwise convs always use it: their per-position
multiply-adds on rows of a few elements are all overhead.
"""

from __future__ import annotations

from math import prod

import numpy as np

from .. import cpu_kernels
from . import _packed_gemm, _winograd
from ._scratch import scratch, scratch_zeros
from ._window import FlatWindows, _phased, batch_chunks, col2im, im2col, out_size, windows

WIDE_RATIO = 1.15
# maps of at most this many positions run as one GEMM over the whole batch, columns laid out
# (C·K, N·P): per image, a GEMM of a few dozen columns keeps BLAS far from its peak (a 3x3 conv
# on 7x7 maps is faster over the batch), at the price of transposing the output (or gradient) once
SMALL_MAP = 64
BATCH_COLUMN_BYTES = 64 * 2**20
# a weight gradient on the wide grid takes one GEMM per image and kernel position, with no
# column buffer, from this many input channels (a little faster on ResNet's 3x3 layers); with
# fewer, such GEMMs are too thin (an RGB stem is several times slower) and columns are built
DIRECT_WEIGHT_GRAD_CHANNELS = 16


def _is_pointwise(kernel, stride, padding, dilation) -> bool:
    return all(k == 1 for k in kernel) and all(s == 1 for s in stride) and not any(padding)


def _flat(kernel, out, stride, padding, dilation, size, extent=None, limit=WIDE_RATIO):
    """FlatWindows for a conv whose windows suit them (stride 1 or every phase read, and at
    most ``limit`` wide-grid elements per output), else None."""
    if any(s > 1 for s in stride) and not _phased(kernel, stride, dilation):
        return None
    fw = FlatWindows(tuple(kernel), tuple(out), tuple(stride), tuple(padding), tuple(dilation),
                     tuple(size), extent)
    return fw if fw.ratio() <= limit else None


def _wide_columns(xp, fw, x):
    """Columns (N, C, prod(K), L) of ``x`` on ``fw``'s wide grid (a scratch buffer)."""
    planes = fw.gather(xp, x)
    cols = scratch(xp, "cols", x.shape[:2] + (len(fw.places), fw.length), x.dtype)
    for idx in range(len(fw.places)):
        cols[:, :, idx] = fw.view(planes, idx)
    return cols


def _batched(n, groups, channels, kernel, spatial, itemsize) -> bool:
    return (groups == 1 and n > 1 and spatial <= SMALL_MAP
            and channels * prod(kernel) * n * spatial * itemsize <= BATCH_COLUMN_BYTES)


def _batch_columns(xp, x, kernel, out, stride, padding, dilation):
    """Columns (C·prod(K), N·prod(out)) of the whole batch (a scratch buffer)."""
    n, c = x.shape[:2]
    spatial = prod(out)
    if _is_pointwise(kernel, stride, padding, dilation):
        cols = scratch(xp, "cols", (c, n) + tuple(out), x.dtype)
        cols[...] = x.swapaxes(0, 1)
        return cols.reshape(c, n * spatial)
    cols = scratch(xp, "cols", (c,) + tuple(kernel) + (n,) + tuple(out), x.dtype)
    for pos, view in windows(xp, x.swapaxes(0, 1), kernel, out, stride, padding, dilation):
        cols[(slice(None),) + pos] = view  # windows treat the two leading dims alike
    return cols.reshape(c * prod(kernel), n * spatial)


def _channels_first(xp, a, role: str):
    """(N, C, *S) -> (C, N·prod(S)) in a scratch buffer."""
    n, c = a.shape[:2]
    out = scratch(xp, role, (c, n) + tuple(a.shape[2:]), a.dtype)
    out[...] = a.swapaxes(0, 1)
    return out.reshape(c, n * prod(a.shape[2:]))


def _batch_first(y, n: int, spatial: tuple):
    """(C, N·prod(S)) -> a new (N, C, *S) array."""
    return y.reshape((y.shape[0], n) + tuple(spatial)).swapaxes(0, 1).copy()


def _weight_matmul(xp, w2, cols, out) -> None:
    """out = w2 @ cols for weights (groups, Cout/groups, K) and columns (images, groups, K, P);
    one image of a dense conv may run through the GEMM on a packed weight (``_packed_gemm``)."""
    if cols.shape[:2] == (1, 1) and _packed_gemm.left_matmul(xp, w2[0], cols[0, 0], out=out[0, 0]) is not None:
        return
    xp.matmul(w2, cols, out=out)


def conv_out_shape(x_shape, kernel, stride, padding, dilation) -> tuple:
    return tuple(out_size(n, k, s, p, d) for n, k, s, p, d in zip(x_shape[2:], kernel, stride, padding, dilation))


def conv_forward(xp, x, w, b, stride, padding, dilation, groups):
    """y = conv(x, w) + b."""
    n, c = x.shape[:2]
    cout, cg = w.shape[:2]
    kernel = w.shape[2:]
    if all(k == 1 for k in kernel) and not any(padding) and any(s > 1 for s in stride):
        # a strided 1x1 conv reads every s-th pixel: those pixels, copied once, are its columns
        x = xp.ascontiguousarray(x[(slice(None), slice(None)) + tuple(slice(None, None, s) for s in stride)])
        stride = (1,) * len(stride)
    out = conv_out_shape(x.shape, kernel, stride, padding, dilation)
    spatial = prod(out)
    narrow = cpu_kernels.kernel("narrow_conv", xp)
    if narrow is not None and narrow.applies(x, w, groups):
        return narrow.conv2d(x, w, b, stride, padding, dilation)
    if _winograd.applies(xp, x, w, stride, dilation, groups):
        y = _winograd.conv2d(x, w, b, padding)
        if y is not None:
            return y
    if cg == 1 and groups > 1:
        y = _compiled_depthwise(xp, x, w, b, stride, padding, dilation)
        if y is not None:
            return y
        y = _depthwise(xp, x, w, out, stride, padding, dilation, groups).reshape((n, cout) + out)
    elif _batched(n, groups, c, kernel, spatial, x.dtype.itemsize):
        cols = _batch_columns(xp, x, kernel, out, stride, padding, dilation)
        y = _batch_first(xp.matmul(w.reshape(cout, -1), cols), n, out)
    else:
        w2 = w.reshape(groups, cout // groups, cg * prod(kernel))
        # one image whose GEMM runs on a packed weight takes exact columns: the wide grid's extra
        # ones (a quarter more on a 7x7 map) would be computed too
        packed = n == 1 and groups == 1 and _packed_gemm.left_applies(xp, w2[0], spatial)
        fw = None if packed or _is_pointwise(kernel, stride, padding, dilation) else \
            _flat(kernel, out, stride, padding, dilation, x.shape[2:])
        if fw is not None:
            length = fw.length
            y = scratch(xp, "wide", (n, groups, cout // groups, length), x.dtype)
            for i, j in batch_chunks(n, c * prod(kernel) * length * x.dtype.itemsize):
                cols = _wide_columns(xp, fw, x[i:j])
                _weight_matmul(xp, w2, cols.reshape(j - i, groups, cg * prod(kernel), length), y[i:j])
            y = fw.to_outputs(y.reshape(n, cout, length)).copy()  # out of the scratch buffer
        else:
            y = xp.empty((n, groups, cout // groups, spatial), dtype=x.dtype)
            if _is_pointwise(kernel, stride, padding, dilation):
                _weight_matmul(xp, w2, x.reshape(n, groups, cg, spatial), y)
            else:
                per_image = c * prod(kernel) * spatial * x.dtype.itemsize
                for i, j in batch_chunks(n, per_image):
                    cols = im2col(xp, x[i:j], kernel, out, stride, padding, dilation)
                    _weight_matmul(xp, w2, cols.reshape(j - i, groups, cg * prod(kernel), spatial), y[i:j])
            y = y.reshape((n, cout) + out)
    if b is not None:
        y += b.reshape((cout,) + (1,) * len(out))
    return y


def conv_forward_activation(xp, x, w, b, stride, padding, dilation, groups, activation: str):
    """activation(conv(x, w) + b) with the bias and the activation ("relu", "hardswish",
    "silu") in one compiled pass over the conv's output, in place, as onnxruntime fuses a conv
    and its activation; the bits of running the two ops one after the other. None, before any
    work, where that pass does not run (numba off or missing, CuPy arrays, not float32)."""
    ready = _conv_for_epilogue(xp, x, w, b, stride, padding, dilation, groups)
    if ready is None:
        return None
    compiled, y, bias = ready
    code = {"relu": compiled.RELU, "hardswish": compiled.HARDSWISH, "silu": compiled.SILU}[activation]
    compiled.bias_activation_float32(y.reshape(y.shape[0], y.shape[1], -1), bias, code)
    return y


def conv_forward_residual(xp, x, w, b, other, stride, padding, dilation, groups, relu: bool):
    """(conv(x, w) + b) + other, then ReLU when ``relu``: a residual block's end, with the bias,
    the residual add and the ReLU in one compiled pass over the conv's output, in place, as
    onnxruntime fuses a conv with the sum after it; the bits of the three ops one after the
    other. ``other`` has the conv's output shape. None, before any work, where that pass does
    not run (as ``conv_forward_activation``)."""
    ready = _conv_for_epilogue(xp, x, w, b, stride, padding, dilation, groups, other)
    if ready is None:
        return None
    compiled, y, bias = ready
    rows = y.shape[:2] + (-1,)
    compiled.bias_residual_float32(y.reshape(rows), bias, xp.ascontiguousarray(other).reshape(rows), relu)
    return y


def _conv_for_epilogue(xp, x, w, b, stride, padding, dilation, groups, *others):
    """(compiled elementwise kernels, the conv's contiguous float32 output without its bias,
    the bias left for the epilogue to add: empty where none is), or None where the compiled
    epilogue does not run: numba off or missing, CuPy arrays, an operand not float32."""
    compiled = cpu_kernels.kernel("elementwise", xp)
    if compiled is None or any(a is not None and a.dtype != np.float32 for a in (x, w, b) + others):
        return None
    # the compiled depthwise and narrow-input kernels start their sums from the bias; every other
    # path adds it last
    narrow = cpu_kernels.kernel("narrow_conv", xp)
    bias_first = (w.shape[1] == 1 and groups > 1 and cpu_kernels.kernel("depthwise", xp) is not None) or \
        (narrow is not None and narrow.applies(x, w, groups))
    y = xp.ascontiguousarray(conv_forward(xp, x, w, b if bias_first else None, stride, padding, dilation, groups))
    bias = _NO_BIAS if bias_first or b is None else xp.ascontiguousarray(b)
    return compiled, y, bias


_NO_BIAS = np.zeros(0, np.float32)


def _compiled_depthwise(xp, x, w, b, stride, padding, dilation):
    """The depthwise conv (bias included) by the compiled kernel, or None where there is none
    (numba missing or turned off, CuPy arrays, 3-d convs, other dtypes than float32/64)."""
    compiled = cpu_kernels.kernel("depthwise", xp)
    if compiled is None or x.ndim not in (3, 4) or x.dtype not in (np.float32, np.float64):
        return None
    if x.ndim == 3:  # a 1-d conv is a 2-d one over maps one row high
        y = compiled.depthwise_conv2d(x[:, :, None], w[:, :, None], b, (1,) + tuple(stride), (0,) + tuple(padding),
                                      (1,) + tuple(dilation))
        return y[:, :, 0]
    return compiled.depthwise_conv2d(x, w, b, stride, padding, dilation)


def _depthwise(xp, x, w, out, stride, padding, dilation, groups):
    # y[n, c·m + j] = sum_k w[c·m + j, 0, k] · x_k[n, c]  (m output channels per input channel)
    n = x.shape[0]
    mult = w.shape[0] // groups
    fw = FlatWindows(tuple(w.shape[2:]), tuple(out), tuple(stride), tuple(padding), tuple(dilation),
                     tuple(x.shape[2:]))
    wk = w.reshape(groups, mult, -1, 1)
    planes = fw.gather(xp, x)
    y = scratch_zeros(xp, "wide", (n, groups, mult, fw.length), x.dtype)
    tmp = scratch(xp, "cols", y.shape, x.dtype)
    for idx in range(len(fw.places)):
        xp.multiply(fw.view(planes, idx)[:, :, None], wk[:, :, idx], out=tmp)
        y += tmp
    return fw.to_outputs(y).copy()  # out of the scratch buffer


def _is_flipped_conv(kernel, stride, padding, output_padding, dilation, groups) -> bool:
    """Whether a transposed conv is a plain conv with the flipped kernel: stride and dilation 1,
    one group, and padding below the kernel size. It is then cheaper that way (the input
    gradient of every stride-1 conv): columns gathered ahead of the GEMM instead of the GEMM's
    columns scattered after it, measurably faster on ResNet's 3x3 layers. 1x1 kernels are a GEMM
    either way."""
    return (groups == 1 and all(s == 1 for s in stride) and all(d == 1 for d in dilation)
            and not any(output_padding) and any(k > 1 for k in kernel)
            and all(p <= k - 1 for p, k in zip(padding, kernel)))


def _flipped(xp, w):
    """(Cin, Cout, *K) transposed-conv weight -> the (Cout, Cin, *K) conv weight, kernel reversed."""
    reverse = (slice(None), slice(None)) + (slice(None, None, -1),) * (w.ndim - 2)
    return xp.ascontiguousarray(w.swapaxes(0, 1)[reverse])


def conv_transpose_forward(xp, x, w, b, stride, padding, output_padding, dilation, groups):
    """y = conv_transpose(x, w) + b: per image chunk, cols = wᵀ @ x, then col2im; at stride 1,
    a convolution with the flipped kernel instead."""
    if _is_flipped_conv(w.shape[2:], stride, padding, output_padding, dilation, groups):
        return conv_forward(xp, x, _flipped(xp, w), b, stride,
                            tuple(k - 1 - p for k, p in zip(w.shape[2:], padding)), dilation, 1)
    n, cin = x.shape[:2]
    cout_g = w.shape[1]
    kernel = w.shape[2:]
    inp = x.shape[2:]
    cout = cout_g * groups
    size = tuple((i - 1) * s - 2 * p + d * (k - 1) + op + 1
                 for i, k, s, p, op, d in zip(inp, kernel, stride, padding, output_padding, dilation))
    # (g, Cin/g, Cout/g·K) viewed transposed: BLAS reads it with a transpose flag, no copy
    wt = w.reshape(groups, cin // groups, cout_g * prod(kernel)).swapaxes(-1, -2)
    pointwise = _is_pointwise(kernel, stride, padding, dilation) and not any(output_padding)
    fw = None if pointwise else _flat(kernel, inp, stride, padding, dilation, size,
                                      extent=tuple(n_ + p for n_, p in zip(size, padding)))
    if _batched(n, groups, cout, kernel, prod(inp), x.dtype.itemsize):
        cols = xp.matmul(wt[0], _channels_first(xp, x, "grid"))  # (Cout·K, N·P)
        if pointwise:
            y = _batch_first(cols, n, size)
        else:  # col2im reads (N, Cout, *K, *P) through a transposed view of the columns
            cols = cols.reshape((cout,) + tuple(kernel) + (n,) + tuple(inp))
            cols = xp.moveaxis(cols, 1 + len(kernel), 0)
            y = col2im(xp, cols, size, stride, padding, dilation)
    elif pointwise:
        y = xp.matmul(wt, x.reshape(n, groups, cin // groups, prod(inp))).reshape((n, cout) + size)
    elif fw is not None:
        # columns on the wide grid (zeros in its extra entries) scattered into the planes
        y = xp.empty((n, cout) + size, dtype=x.dtype)
        per_image = cout * prod(kernel) * fw.length * x.dtype.itemsize
        for i, j in batch_chunks(n, per_image):
            xw = fw.from_outputs(xp, x[i:j]).reshape(j - i, groups, cin // groups, fw.length)
            cols = scratch(xp, "cols", (j - i, groups, cout_g * prod(kernel), fw.length), x.dtype)
            xp.matmul(wt, xw, out=cols)
            cols = cols.reshape(j - i, cout, prod(kernel), fw.length)
            planes = fw.zero_planes(xp, (j - i, cout), x.dtype)
            for idx in range(len(fw.places)):
                fw.view(planes, idx)[...] += cols[:, :, idx]
            y[i:j] = fw.scatter(xp, planes, x.dtype)
    else:
        y = xp.empty((n, cout) + size, dtype=x.dtype)
        per_image = cout * prod(kernel) * prod(inp) * x.dtype.itemsize
        for i, j in batch_chunks(n, per_image):
            cols = xp.matmul(wt, x[i:j].reshape(j - i, groups, cin // groups, prod(inp)))
            cols = cols.reshape((j - i, cout) + tuple(kernel) + tuple(inp))
            y[i:j] = col2im(xp, cols, size, stride, padding, dilation)
    if b is not None:
        y += b.reshape((cout,) + (1,) * len(size))
    return y


def conv_weight_grad(xp, x, g, kernel, stride, padding, dilation, groups):
    """dL/dw of y = conv(x, w) given g = dL/dy: sum over images of g @ colsᵀ."""
    n, c = x.shape[:2]
    cout = g.shape[1]
    out = g.shape[2:]
    spatial = prod(out)
    cg = c // groups
    if cg == 1 and groups > 1:
        return _depthwise_weight_grad(xp, x, g, kernel, stride, padding, dilation, groups)
    if _batched(n, groups, c, kernel, spatial, x.dtype.itemsize):
        cols = _batch_columns(xp, x, kernel, out, stride, padding, dilation)
        gw = xp.matmul(_channels_first(xp, g, "grid"), cols.T)
        return gw.reshape((cout, cg) + tuple(kernel))
    pointwise = _is_pointwise(kernel, stride, padding, dilation) and tuple(x.shape[2:]) == tuple(out)
    fw = None if pointwise else _flat(kernel, out, stride, padding, dilation, x.shape[2:])
    if fw is not None and groups == 1 and c >= DIRECT_WEIGHT_GRAD_CHANNELS:
        return _weight_grad_by_position(xp, fw, x, g, kernel)
    if fw is not None:  # g on the wide grid: zeros in its extra columns drop those of the columns
        spatial = fw.length
        g = fw.from_outputs(xp, g.reshape(g.shape[:2] + tuple(out)))
    g4 = g.reshape(n, groups, cout // groups, spatial)
    gw = xp.zeros((groups, cout // groups, cg * prod(kernel)), dtype=x.dtype)
    part = xp.empty_like(gw)
    per_image = c * prod(kernel) * spatial * x.dtype.itemsize
    for i, j in batch_chunks(n, per_image):
        if pointwise:
            cols = x[i:j].reshape(j - i, groups, cg, spatial)
        elif fw is not None:
            cols = _wide_columns(xp, fw, x[i:j]).reshape(j - i, groups, cg * prod(kernel), spatial)
        else:
            cols = im2col(xp, x[i:j], kernel, out, stride, padding, dilation)
            cols = cols.reshape(j - i, groups, cg * prod(kernel), spatial)
        for k in range(j - i):  # one GEMM per image, accumulated: no (N, Cout, C·K) temporary
            xp.matmul(g4[i + k], cols[k].swapaxes(-1, -2), out=part)
            gw += part
    return gw.reshape((cout, cg) + tuple(kernel))


def _weight_grad_by_position(xp, fw, x, g, kernel):
    """The weight gradient with no column buffer: for each image and kernel position, the
    (Cout, L) gradient on the wide grid times the (L, C) input that position reads (a strided
    view of the planes, which BLAS reads as it is), summed into that position's (Cout, C)."""
    n, c = x.shape[:2]
    cout = g.shape[1]
    g_wide = fw.from_outputs(xp, g)  # zeros in the grid's extra entries drop what they read
    planes = fw.gather(xp, x)
    gw = xp.zeros((len(fw.places), cout, c), dtype=x.dtype)
    part = xp.empty((cout, c), dtype=x.dtype)
    for k in range(n):
        for idx in range(len(fw.places)):
            xp.matmul(g_wide[k], fw.view(planes, idx)[k].T, out=part)
            gw[idx] += part
    return xp.ascontiguousarray(gw.transpose(1, 2, 0)).reshape((cout, c) + tuple(kernel))


def _depthwise_weight_grad(xp, x, g, kernel, stride, padding, dilation, groups):
    n = x.shape[0]
    out = g.shape[2:]
    mult = g.shape[1] // groups
    fw = FlatWindows(tuple(kernel), tuple(out), tuple(stride), tuple(padding), tuple(dilation),
                     tuple(x.shape[2:]))
    planes = fw.gather(xp, x)
    g4 = fw.from_outputs(xp, g).reshape(n, groups, mult, fw.length)
    gw = xp.empty((groups, mult, prod(kernel)), dtype=x.dtype)
    for idx in range(len(fw.places)):
        gw[:, :, idx] = xp.einsum("ncmp,ncp->cm", g4, fw.view(planes, idx))
    return gw.reshape((groups * mult, 1) + tuple(kernel))
