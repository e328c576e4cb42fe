"""Convolution kernels on arrays (numpy or CuPy): im2col into one BLAS matmul per image chunk.

Layouts: x (N, C, *S), conv weight (Cout, C/g, *K), transposed-conv weight (Cin, Cout/g, *K).
The column buffer is (N, g, C/g·prod(K), prod(O)) so that ``weight (g, Cout/g, C/g·prod(K)) @
cols`` writes the output directly in (N, Cout, *O) order, with no transpose afterwards.
Depthwise convolutions (one input channel per group) skip the column buffer: a multiply-add
per kernel position is cheaper than a stack of 1-wide matmuls.
"""

from __future__ import annotations

from math import prod

from ._window import batch_chunks, col2im, im2col, out_size, windows


def _is_pointwise(kernel, stride, padding, dilation) -> bool:
    return all(k == 1 for k in kernel) and all(s == 1 for s in stride) and not any(padding)


def conv_out_shape(x_shape, kernel, stride, padding, dilation) -> tuple:
    return tuple(out_size(n, k, s, p, d) for n, k, s, p, d in zip(x_shape[2:], kernel, stride, padding, dilation))


def conv_forward(xp, x, w, b, stride, padding, dilation, groups):
    """y = conv(x, w) + b."""
    n, c = x.shape[:2]
    cout, cg = w.shape[:2]
    kernel = w.shape[2:]
    out = conv_out_shape(x.shape, kernel, stride, padding, dilation)
    spatial = prod(out)
    if cg == 1 and groups > 1:
        y = _depthwise(xp, x, w, out, stride, padding, dilation, groups).reshape((n, cout) + out)
    else:
        w2 = w.reshape(groups, cout // groups, cg * prod(kernel))
        y = xp.empty((n, groups, cout // groups, spatial), dtype=x.dtype)
        if _is_pointwise(kernel, stride, padding, dilation):
            xp.matmul(w2, x.reshape(n, groups, cg, spatial), out=y)
        else:
            per_image = c * prod(kernel) * spatial * x.dtype.itemsize
            for i, j in batch_chunks(n, per_image):
                cols = im2col(xp, x[i:j], kernel, out, stride, padding, dilation)
                xp.matmul(w2, cols.reshape(j - i, groups, cg * prod(kernel), spatial), out=y[i:j])
        y = y.reshape((n, cout) + out)
    if b is not None:
        y += b.reshape((cout,) + (1,) * len(out))
    return y


def _depthwise(xp, x, w, out, stride, padding, dilation, groups):
    # y[n, c·m + j] = sum_k w[c·m + j, 0, k] · x_k[n, c]  (m output channels per input channel)
    n = x.shape[0]
    mult = w.shape[0] // groups
    wk = w.reshape((groups, mult, -1) + (1,) * len(out))
    y = xp.zeros((n, groups, mult) + out, dtype=x.dtype)
    tmp = xp.empty_like(y)
    for idx, (_, view) in enumerate(windows(xp, x, w.shape[2:], out, stride, padding, dilation)):
        xp.multiply(view[:, :, None], wk[:, :, idx], out=tmp)
        y += tmp
    return y


def conv_transpose_forward(xp, x, w, b, stride, padding, output_padding, dilation, groups):
    """y = conv_transpose(x, w) + b: per image chunk, cols = wᵀ @ x, then col2im."""
    n, cin = x.shape[:2]
    cout_g = w.shape[1]
    kernel = w.shape[2:]
    inp = x.shape[2:]
    cout = cout_g * groups
    size = tuple((i - 1) * s - 2 * p + d * (k - 1) + op + 1
                 for i, k, s, p, op, d in zip(inp, kernel, stride, padding, output_padding, dilation))
    # (g, Cin/g, Cout/g·K) viewed transposed: BLAS reads it with a transpose flag, no copy
    wt = w.reshape(groups, cin // groups, cout_g * prod(kernel)).swapaxes(-1, -2)
    if _is_pointwise(kernel, stride, padding, dilation) and not any(output_padding):
        y = xp.matmul(wt, x.reshape(n, groups, cin // groups, prod(inp))).reshape((n, cout) + size)
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
    g4 = g.reshape(n, groups, cout // groups, spatial)
    gw = xp.zeros((groups, cout // groups, cg * prod(kernel)), dtype=x.dtype)
    per_image = c * prod(kernel) * spatial * x.dtype.itemsize
    pointwise = _is_pointwise(kernel, stride, padding, dilation) and tuple(x.shape[2:]) == tuple(out)
    for i, j in batch_chunks(n, per_image):
        if pointwise:
            cols = x[i:j].reshape(j - i, groups, cg, spatial)
        else:
            cols = im2col(xp, x[i:j], kernel, out, stride, padding, dilation)
            cols = cols.reshape(j - i, groups, cg * prod(kernel), spatial)
        for k in range(j - i):  # one GEMM per image, accumulated: no (N, Cout, C·K) temporary
            gw += xp.matmul(g4[i + k], cols[k].swapaxes(-1, -2))
    return gw.reshape((cout, cg) + tuple(kernel))


def _depthwise_weight_grad(xp, x, g, kernel, stride, padding, dilation, groups):
    n = x.shape[0]
    out = g.shape[2:]
    mult = g.shape[1] // groups
    g4 = g.reshape((n, groups, mult, -1))
    gw = xp.empty((groups, mult, prod(kernel)), dtype=x.dtype)
    for idx, (_, view) in enumerate(windows(xp, x, kernel, out, stride, padding, dilation)):
        gw[:, :, idx] = xp.einsum("ncmp,ncp->cm", g4, view.reshape(n, groups, -1))
    return gw.reshape((groups * mult, 1) + tuple(kernel))
