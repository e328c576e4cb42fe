"""Convolutions on the GPU: through cuDNN where it is installed (``cudnn_conv``: forward,
transposed and weight gradient), else our own: an im2col RawKernel plus one cuBLAS GEMM per
batch chunk, col2im for transposed convolutions, and a direct kernel for depthwise convolutions.

Column layout: ``cols[c·K + k, n·P + p]`` (channel and kernel position down, image and output
position across), so a chunk of ``Nc`` images is one (g, Cg·K, Nc·P) operand and the forward,
the weight gradient and the transposed conv are each ONE strided-batched GEMM over the groups
(a plain GEMM when groups = 1). The forward's (Cout, Nc·P) result is transposed into
(Nc, Cout, P) with one copy. 1x1 stride-1 convs skip im2col: the image is its own column
matrix. Chunks keep the column buffer under ``COLUMN_BYTES``.

Spatial dims are padded to three (size 1, kernel 1, stride 1), so one kernel serves 1d/2d/3d.
``source_index`` and ``gather_index`` are the index arithmetic of im2col and col2im;
``im2col_reference``, ``col2im_reference`` and ``depthwise_reference`` run it in numpy. Handed
numpy arrays, the launchers use them, so the layouts, chunking and GEMMs of this module run
(and are tested) on the CPU.
"""

from __future__ import annotations

from math import prod

import numpy as np

from . import _source, blas, cudnn_conv
from .cache import raw_kernel

COLUMN_BYTES = 256 * 2**20  # a GPU has room for larger column buffers than a CPU cache

_GEOMETRY = r"""
struct Geo {
    long long s0, s1, s2;   // input spatial size
    long long k0, k1, k2;   // kernel
    long long o0, o1, o2;   // output spatial size
    long long st0, st1, st2, p0, p1, p2, d0, d1, d2;
};
// passed as 18 scalars (the order of ``geometry()``) and gathered into a Geo
#define GEO_PARAMS long long s0, long long s1, long long s2, long long k0, long long k1, long long k2, \
    long long o0, long long o1, long long o2, long long st0, long long st1, long long st2, \
    long long p0, long long p1, long long p2, long long d0, long long d1, long long d2
#define GEO Geo g = {s0, s1, s2, k0, k1, k2, o0, o1, o2, st0, st1, st2, p0, p1, p2, d0, d1, d2}
"""

_IM2COL = r"""
// cols[(c·K + k), (n·P + o)] = x[n, c, o·stride − pad + k·dil] (0 outside the input)
extern "C" __global__ void __launch_bounds__(STRIDE_BLOCK)
im2col(const T* x, T* cols, long long n_img, long long channels, GEO_PARAMS) {
    GEO;
    long long K = g.k0 * g.k1 * g.k2, P = g.o0 * g.o1 * g.o2, S = g.s0 * g.s1 * g.s2;
    long long total = channels * K * n_img * P;
    GRID_STRIDE(idx, total) {
        long long col = idx % (n_img * P), row = idx / (n_img * P);
        long long n = col / P, o = col % P, c = row / K, k = row % K;
        long long i0 = (o / (g.o1 * g.o2)) * g.st0 - g.p0 + (k / (g.k1 * g.k2)) * g.d0;
        long long i1 = ((o / g.o2) % g.o1) * g.st1 - g.p1 + ((k / g.k2) % g.k1) * g.d1;
        long long i2 = (o % g.o2) * g.st2 - g.p2 + (k % g.k2) * g.d2;
        bool inside = i0 >= 0 && i0 < g.s0 && i1 >= 0 && i1 < g.s1 && i2 >= 0 && i2 < g.s2;
        cols[idx] = inside ? x[(n * channels + c) * S + (i0 * g.s1 + i1) * g.s2 + i2] : STORE((ACC)0);
    }
}
"""

_COL2IM = r"""
// y[n, c, q] = sum over kernel positions k with q + pad − k·dil = i·stride, 0 <= i < I, of
// cols[(c·K + k), (n·I + i)]: each output element gathers its terms (no atomics).
// Here the Geo's "input" is the output y and its "output" is the columns' positions I.
__device__ __forceinline__ bool gather_index(long long q, long long k, long long st, long long p,
                                             long long d, long long in, long long* i) {
    long long t = q + p - k * d;
    *i = t / st;
    return t >= 0 && t % st == 0 && *i < in;
}
extern "C" __global__ void __launch_bounds__(STRIDE_BLOCK)
col2im(const T* cols, T* y, long long n_img, long long channels, GEO_PARAMS) {
    GEO;
    long long K = g.k0 * g.k1 * g.k2, I = g.o0 * g.o1 * g.o2, S = g.s0 * g.s1 * g.s2;
    long long total = n_img * channels * S;
    GRID_STRIDE(idx, total) {
        long long q = idx % S, nc = idx / S, c = nc % channels, n = nc / channels;
        long long q0 = q / (g.s1 * g.s2), q1 = (q / g.s2) % g.s1, q2 = q % g.s2;
        ACC acc = 0;
        for (long long k0 = 0; k0 < g.k0; ++k0) {
            long long i0; if (!gather_index(q0, k0, g.st0, g.p0, g.d0, g.o0, &i0)) continue;
            for (long long k1 = 0; k1 < g.k1; ++k1) {
                long long i1; if (!gather_index(q1, k1, g.st1, g.p1, g.d1, g.o1, &i1)) continue;
                for (long long k2 = 0; k2 < g.k2; ++k2) {
                    long long i2; if (!gather_index(q2, k2, g.st2, g.p2, g.d2, g.o2, &i2)) continue;
                    long long k = (k0 * g.k1 + k1) * g.k2 + k2, i = (i0 * g.o1 + i1) * g.o2 + i2;
                    acc += LOAD(cols[(c * K + k) * (n_img * I) + n * I + i]);
                }
            }
        }
        y[idx] = STORE(acc);
    }
}
"""

_DEPTHWISE = r"""
// y[n, co, o] = sum_k w[co, k] · x[n, co / mult, o·stride − pad + k·dil]   (one input channel per group)
extern "C" __global__ void __launch_bounds__(STRIDE_BLOCK)
depthwise(const T* x, const T* w, T* y, long long n_img, long long cin, long long mult, GEO_PARAMS) {
    GEO;
    long long K = g.k0 * g.k1 * g.k2, P = g.o0 * g.o1 * g.o2, S = g.s0 * g.s1 * g.s2;
    long long total = n_img * cin * mult * P;
    GRID_STRIDE(idx, total) {
        long long o = idx % P, nco = idx / P, co = nco % (cin * mult), n = nco / (cin * mult);
        const T* xc = x + (n * cin + co / mult) * S;
        long long o0 = o / (g.o1 * g.o2), o1 = (o / g.o2) % g.o1, o2 = o % g.o2;
        ACC acc = 0;
        for (long long k = 0; k < K; ++k) {
            long long i0 = o0 * g.st0 - g.p0 + (k / (g.k1 * g.k2)) * g.d0;
            long long i1 = o1 * g.st1 - g.p1 + ((k / g.k2) % g.k1) * g.d1;
            long long i2 = o2 * g.st2 - g.p2 + (k % g.k2) * g.d2;
            if (i0 >= 0 && i0 < g.s0 && i1 >= 0 && i1 < g.s1 && i2 >= 0 && i2 < g.s2)
                acc += LOAD(w[co * K + k]) * LOAD(xc[(i0 * g.s1 + i1) * g.s2 + i2]);
        }
        y[idx] = STORE(acc);
    }
}
"""

_KERNELS = {"im2col": _IM2COL, "col2im": _COL2IM, "depthwise": _DEPTHWISE}


def source(name: str, dtype) -> str:
    return _source.type_header(dtype) + _source.GRID_STRIDE + _GEOMETRY + _KERNELS[name]


def geometry(size, kernel, out, stride, padding, dilation) -> tuple:
    """The ``Geo`` struct's 18 values, spatial dims padded to three."""
    def three(v, fill):
        v = tuple(int(a) for a in v)
        return (fill,) * (3 - len(v)) + v
    return (three(size, 1) + three(kernel, 1) + three(out, 1) + three(stride, 1)
            + three(padding, 0) + three(dilation, 1))


def _geo_args(values: tuple) -> tuple:
    return tuple(np.int64(v) for v in values)


def _launch(name: str, dtype, total: int, args) -> None:
    _source.launch_grid_stride(raw_kernel(name, dtype, source), total, args)


def chunks(n: int, bytes_per_item: int, budget: int | None = None) -> list:
    """(start, stop) ranges over ``n`` images so each chunk's columns stay under ``budget``
    (``COLUMN_BYTES`` by default, read at call time)."""
    step = max(1, (COLUMN_BYTES if budget is None else budget) // max(bytes_per_item, 1))
    return [(i, min(i + step, n)) for i in range(0, n, step)]


def im2col(xp, x, kernel, out, stride, padding, dilation):
    """(C·K, N·P) columns of x (N, C, *S)."""
    if xp is np:
        return im2col_reference(x, kernel, out, stride, padding, dilation)
    x = xp.ascontiguousarray(x)
    n, c = x.shape[:2]
    cols = xp.empty((c * prod(kernel), n * prod(out)), dtype=x.dtype)
    geo = geometry(x.shape[2:], kernel, out, stride, padding, dilation)
    _launch("im2col", x.dtype, cols.size, (x, cols, np.int64(n), np.int64(c)) + _geo_args(geo))
    return cols


def col2im(xp, cols, n, channels, size, kernel, inp, stride, padding, dilation):
    """(N, C, *size) sums of columns (C·K, N·I) — the adjoint of ``im2col``."""
    if xp is np:
        return col2im_reference(cols, n, channels, size, kernel, inp, stride, padding, dilation)
    y = xp.empty((n, channels) + tuple(size), dtype=cols.dtype)
    geo = geometry(size, kernel, inp, stride, padding, dilation)
    _launch("col2im", cols.dtype, y.size, (cols, y, np.int64(n), np.int64(channels)) + _geo_args(geo))
    return y


def depthwise(xp, x, w, out, stride, padding, dilation):
    """y (N, Cout, *out) of a conv with one input channel per group, one thread per output."""
    if xp is np:
        return depthwise_reference(x, w, out, stride, padding, dilation)
    x = xp.ascontiguousarray(x)
    n, c = x.shape[:2]
    cout = w.shape[0]
    y = xp.empty((n, cout) + tuple(out), dtype=x.dtype)
    geo = geometry(x.shape[2:], w.shape[2:], out, stride, padding, dilation)
    _launch("depthwise", x.dtype, y.size, (x, xp.ascontiguousarray(w), y, np.int64(n), np.int64(c),
                                           np.int64(cout // c)) + _geo_args(geo))
    return y


def _out_shape(size, kernel, stride, padding, dilation) -> tuple:
    return tuple((s + 2 * p - d * (k - 1) - 1) // st + 1
                 for s, k, st, p, d in zip(size, kernel, stride, padding, dilation))


def _pointwise(kernel, stride, padding) -> bool:
    return all(k == 1 for k in kernel) and all(s == 1 for s in stride) and not any(padding)


def _to_image_major(xp, y, n, cout, out):
    """(Cout, N·P) -> (N, Cout, *out), one copy."""
    return xp.ascontiguousarray(y.reshape(cout, n, -1).transpose(1, 0, 2)).reshape((n, cout) + tuple(out))


def _channel_major(xp, x, groups):
    """x (N, C, *S) as (g, C/g, N·S): the columns of a pointwise conv."""
    n, c = x.shape[:2]
    return xp.ascontiguousarray(x.reshape(n, c, -1).transpose(1, 0, 2)).reshape(groups, c // groups, -1)


def conv_forward(xp, x, w, b, stride, padding, dilation, groups):
    """y = conv(x, w) + b, or None when the dtype has no kernel."""
    if not _source.supported(x, w, b):
        return None
    y = cudnn_conv.forward(xp, x, w, b, stride, padding, dilation)
    if y is not None:
        return y
    n, c = x.shape[:2]
    cout, cg = w.shape[:2]
    kernel = tuple(w.shape[2:])
    out = _out_shape(x.shape[2:], kernel, stride, padding, dilation)
    if cg == 1 and groups > 1:
        y = depthwise(xp, x, w, out, stride, padding, dilation)
    else:
        w3 = w.reshape(groups, cout // groups, -1)
        if _pointwise(kernel, stride, padding):
            y = _to_image_major(xp, blas.product(xp, w3, _channel_major(xp, x, groups)), n, cout, out)
        else:
            y = xp.empty((n, cout) + out, dtype=x.dtype)
            per_image = c * prod(kernel) * prod(out) * x.dtype.itemsize
            for i, j in chunks(n, per_image):
                cols = im2col(xp, x[i:j], kernel, out, stride, padding, dilation).reshape(groups, cg * prod(kernel), -1)
                y[i:j] = _to_image_major(xp, blas.product(xp, w3, cols), j - i, cout, out)
    if b is not None:
        y += b.reshape((cout,) + (1,) * len(out))
    return y


def conv_transpose_forward(xp, x, w, b, stride, padding, output_padding, dilation, groups):
    """y = conv_transpose(x, w) + b: per chunk one GEMM to columns, then col2im."""
    if not _source.supported(x, w, b):
        return None
    y = cudnn_conv.transposed(xp, x, w, b, stride, padding, output_padding, dilation, groups)
    if y is not None:
        return y
    n, cin = x.shape[:2]
    cout_g = w.shape[1]
    kernel = tuple(w.shape[2:])
    inp = tuple(x.shape[2:])
    cout = cout_g * groups
    size = tuple((i - 1) * s - 2 * p + d * (k - 1) + op + 1
                 for i, k, s, p, op, d in zip(inp, kernel, stride, padding, output_padding, dilation))
    wt = w.reshape(groups, cin // groups, cout_g * prod(kernel)).swapaxes(-1, -2)
    y = xp.empty((n, cout) + size, dtype=x.dtype)
    per_image = cout * prod(kernel) * prod(inp) * x.dtype.itemsize
    for i, j in chunks(n, per_image):
        cols = blas.product(xp, wt, _channel_major(xp, x[i:j], groups)).reshape(cout * prod(kernel), -1)
        y[i:j] = col2im(xp, cols, j - i, cout, size, kernel, inp, stride, padding, dilation)
    if b is not None:
        y += b.reshape((cout,) + (1,) * len(size))
    return y


def conv_weight_grad(xp, x, g, kernel, stride, padding, dilation, groups):
    """dL/dw of y = conv(x, w): per chunk one GEMM of the output gradient with the columns."""
    if not _source.supported(x, g):
        return None
    gw = cudnn_conv.weight_grad(xp, x, g, kernel, stride, padding, dilation, groups)
    if gw is not None:
        return gw
    n, c = x.shape[:2]
    cout = g.shape[1]
    out = tuple(g.shape[2:])
    cg = c // groups
    if cg == 1 and groups > 1:
        return None  # depthwise: the generic per-position kernel has no column buffer to build
    gw = xp.zeros((groups, cout // groups, cg * prod(kernel)), dtype=x.dtype)
    per_image = c * prod(kernel) * prod(out) * x.dtype.itemsize
    pointwise = _pointwise(kernel, stride, padding) and tuple(x.shape[2:]) == out
    for i, j in chunks(n, per_image):
        cols = _channel_major(xp, x[i:j], groups) if pointwise else \
            im2col(xp, x[i:j], kernel, out, stride, padding, dilation).reshape(groups, cg * prod(kernel), -1)
        gw += blas.product(xp, _channel_major(xp, g[i:j], groups), cols.swapaxes(-1, -2))
    return gw.reshape((cout, cg) + tuple(kernel))


# --- op-level kernels ----------------------------------------------------------------------------

def _with_fallback(launch):
    def bind(generic):
        def run(xp, *args, **attrs):
            out = launch(xp, *args, **attrs)
            return generic(xp, *args, **attrs) if out is None else out

        run.__name__ = f"{launch.__name__}_cuda"
        return run

    return bind


@_with_fallback
def convolution(xp, x, weight, bias=None, *, stride, padding, dilation, groups):
    return conv_forward(xp, x, weight, bias, stride, padding, dilation, groups)


@_with_fallback
def conv_transpose(xp, x, weight, bias=None, *, stride, padding, output_padding, dilation, groups):
    return conv_transpose_forward(xp, x, weight, bias, stride, padding, output_padding, dilation, groups)


@_with_fallback
def conv_weight_grad_op(xp, x, g, *, kernel_size, stride, padding, dilation, groups):
    return conv_weight_grad(xp, x, g, kernel_size, stride, padding, dilation, groups)


@_with_fallback
def conv_transpose_weight_grad(xp, x, g, *, kernel_size, stride, padding, output_padding, dilation, groups):
    # the weight gradient of the conv that maps g back to x's shape, roles swapped
    return conv_weight_grad(xp, g, x, kernel_size, stride, padding, dilation, groups)


# --- the index arithmetic in numpy -------------------------------------------------------------

def source_index(o, k, stride: int, padding: int, dilation: int):
    """Input coordinate that output position ``o`` reads at kernel position ``k`` (im2col)."""
    return o * stride - padding + k * dilation


def gather_index(q, k, stride: int, padding: int, dilation: int, inp: int):
    """(column position i, valid) that output element ``q`` of a col2im gathers at kernel
    position ``k``: q + padding − k·dilation = i·stride with 0 <= i < inp."""
    t = q + padding - k * dilation
    i = np.where(t >= 0, t, 0) // stride
    return i, (t >= 0) & (t % stride == 0) & (i < inp)


def im2col_reference(x: np.ndarray, kernel, out, stride, padding, dilation) -> np.ndarray:
    """``im2col`` in numpy: the (C·K, N·P) columns from ``source_index``."""
    n, c = x.shape[:2]
    nd = len(kernel)
    ks = np.indices(kernel).reshape(nd, -1)            # (nd, K)
    os_ = np.indices(out).reshape(nd, -1)              # (nd, P)
    src = [source_index(os_[d][None, :], ks[d][:, None], stride[d], padding[d], dilation[d]) for d in range(nd)]
    inside = np.ones(src[0].shape, bool)
    for d in range(nd):
        inside &= (src[d] >= 0) & (src[d] < x.shape[2 + d])
    clipped = tuple(np.clip(s, 0, x.shape[2 + d] - 1) for d, s in enumerate(src))
    vals = x[(slice(None), slice(None)) + clipped] * inside        # (N, C, K, P)
    return vals.transpose(1, 2, 0, 3).reshape(c * len(ks[0]), n * len(os_[0]))


def col2im_reference(cols: np.ndarray, n: int, channels: int, size, kernel, inp, stride, padding,
                     dilation) -> np.ndarray:
    """``col2im`` in numpy: every output element gathers its terms through ``gather_index``."""
    nd = len(size)
    k_count, i_count = prod(kernel), prod(inp)
    c4 = cols.reshape(channels, k_count, n, i_count)
    y = np.zeros((n, channels) + tuple(size), dtype=cols.dtype)
    qs = np.indices(size)
    for k_flat, kpos in enumerate(np.ndindex(*kernel)):
        idx, valid = [], np.ones(size, bool)
        for d in range(nd):
            i, ok = gather_index(qs[d], kpos[d], stride[d], padding[d], dilation[d], inp[d])
            idx.append(np.where(ok, i, 0))
            valid &= ok
        flat = np.ravel_multi_index(tuple(idx), inp)                # (*size)
        taken = c4[:, k_flat][:, :, flat]                            # (C, N, *size)
        y += np.where(valid, taken, 0).transpose((1, 0) + tuple(range(2, 2 + nd)))
    return y


def depthwise_reference(x: np.ndarray, w: np.ndarray, out, stride, padding, dilation) -> np.ndarray:
    """``depthwise`` in numpy: output channel co reads input channel co // mult."""
    n, c = x.shape[:2]
    cout = w.shape[0]
    k = prod(w.shape[2:])
    cols = im2col_reference(x, w.shape[2:], out, stride, padding, dilation).reshape(c, k, n, -1)
    src = cols[np.arange(cout) // (cout // c)]                          # (Cout, K, N, P)
    y = np.einsum("oknp,ok->nop", src, w.reshape(cout, k))
    return y.reshape((n, cout) + tuple(out)).astype(x.dtype)
