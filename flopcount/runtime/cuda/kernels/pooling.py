"""Max pooling on the GPU: one thread per output element for the forward, and for the
backward one kernel that RECOMPUTES each window's argmax and scatters the output gradient.

The op's contract (``ops/pooling.py``) is that ``max_pool_backward`` takes the input, not saved
indices, so the CUDA path keeps it: the argmax is found again in registers (no index tensor is
stored between forward and backward), then ``atomicAdd`` adds the gradient at that input
element — overlapping windows may pick the same one. Float16 gradients accumulate in a float32
buffer. Ties and NaN follow the CPU kernel: the first maximum in scan order, and a NaN wins.

``window_max_reference`` is the window scan in numpy; handed numpy arrays, the kernels use it.

Average and adaptive pooling run the generic array kernels (strided views, CuPy ufuncs).
"""

from __future__ import annotations

import numpy as np

from . import _source
from .cache import raw_kernel
from .conv import _GEOMETRY, _geo_args, geometry

_WINDOW = r"""
// The window of output o in scan order; out-of-range positions read as -inf (the CPU kernel's
// padding value). Returns the maximum; *arg_in is the input offset of the first maximum
// (a later NaN replaces it), or -1 when that position is padding.
__device__ ACC window_max(const T* xc, long long o, const Geo& g, long long* arg_in) {
    long long o0 = o / (g.o1 * g.o2), o1 = (o / g.o2) % g.o1, o2 = o % g.o2;
    ACC best = -INFINITY;
    long long arg = -1;
    long long k = 0;
    for (long long k0 = 0; k0 < g.k0; ++k0)
        for (long long k1 = 0; k1 < g.k1; ++k1)
            for (long long k2 = 0; k2 < g.k2; ++k2, ++k) {
                long long i0 = o0 * g.st0 - g.p0 + k0 * g.d0;
                long long i1 = o1 * g.st1 - g.p1 + k1 * g.d1;
                long long i2 = o2 * g.st2 - g.p2 + k2 * g.d2;
                bool inside = i0 >= 0 && i0 < g.s0 && i1 >= 0 && i1 < g.s1 && i2 >= 0 && i2 < g.s2;
                long long at = (i0 * g.s1 + i1) * g.s2 + i2;
                ACC v = inside ? LOAD(xc[at]) : (ACC)(-INFINITY);
                if (k == 0 || v > best || v != v) { best = v; arg = inside ? at : -1; }
            }
    *arg_in = arg;
    return best;
}
"""

_FORWARD = r"""
extern "C" __global__ void __launch_bounds__(STRIDE_BLOCK)
max_pool(const T* x, T* y, long long planes, GEO_PARAMS) {
    GEO;
    long long P = g.o0 * g.o1 * g.o2, S = g.s0 * g.s1 * g.s2, total = planes * P;
    GRID_STRIDE(idx, total) {
        long long arg;
        y[idx] = STORE(window_max(x + (idx / P) * S, idx % P, g, &arg));
    }
}
"""

_BACKWARD = r"""
extern "C" __global__ void __launch_bounds__(STRIDE_BLOCK)
max_pool_backward(const T* gy, const T* x, ACC* gx, long long planes, GEO_PARAMS) {
    GEO;
    long long P = g.o0 * g.o1 * g.o2, S = g.s0 * g.s1 * g.s2, total = planes * P;
    GRID_STRIDE(idx, total) {
        long long plane = idx / P, arg;
        window_max(x + plane * S, idx % P, g, &arg);
        if (arg >= 0) atomicAdd(gx + plane * S + arg, LOAD(gy[idx]));
    }
}
"""

_KERNELS = {"max_pool": _FORWARD, "max_pool_backward": _BACKWARD}


def source(name: str, dtype) -> str:
    return (_source.type_header(dtype) + _source.INFINITY_GUARD + _source.GRID_STRIDE + _GEOMETRY + _WINDOW
            + _KERNELS[name])


def window_max_reference(x: np.ndarray, kernel_size, out, stride, padding, dilation) -> tuple:
    """(maxima (N, C, *out), input offset of each window's argmax within its plane, -1 for
    padding): ``window_max`` for every output at once, kernel positions in scan order."""
    planes = x.reshape(x.shape[0] * x.shape[1], -1)
    size = x.shape[2:]
    grids = np.indices(out).reshape(len(out), -1)
    best = arg = None
    for k, pos in enumerate(np.ndindex(*kernel_size)):
        src = [grids[d] * stride[d] - padding[d] + pos[d] * dilation[d] for d in range(len(out))]
        inside = np.all([(s >= 0) & (s < n) for s, n in zip(src, size)], axis=0)
        at = np.ravel_multi_index(tuple(np.clip(s, 0, n - 1) for s, n in zip(src, size)), size)
        v = np.where(inside, planes[:, at].astype(_source.acc_dtype(x.dtype)), -np.inf)
        here = np.where(inside, at, -1)
        if k == 0:
            best, arg = v, np.broadcast_to(here, v.shape).copy()
            continue
        better = (v > best) | (v != v)
        best, arg = np.where(better, v, best), np.where(better, here, arg)
    shape = x.shape[:2] + tuple(out)
    return best.astype(x.dtype).reshape(shape), arg.reshape(shape)


def _launch(name, dtype, total, args):
    _source.launch_grid_stride(raw_kernel(name, dtype, source), total, args)


def _out_size(x_shape, kernel_size, stride, padding, dilation, ceil_mode):
    from ...ops._window import out_size

    return tuple(out_size(n, k, s, p, d, ceil_mode)
                 for n, k, s, p, d in zip(x_shape[2:], kernel_size, stride, padding, dilation))


def max_pool(generic):
    """CUDA kernel of ``max_pool`` (float dtypes; ``generic`` otherwise)."""

    def run(xp, x, *, kernel_size, stride, padding, dilation, ceil_mode):
        if not _source.supported(x):
            return generic(xp, x, kernel_size=kernel_size, stride=stride, padding=padding, dilation=dilation,
                           ceil_mode=ceil_mode)
        out = _out_size(x.shape, kernel_size, stride, padding, dilation, ceil_mode)
        if xp is np:
            return window_max_reference(x, kernel_size, out, stride, padding, dilation)[0]
        x = xp.ascontiguousarray(x)
        y = xp.empty(x.shape[:2] + out, dtype=x.dtype)
        geo = geometry(x.shape[2:], kernel_size, out, stride, padding, dilation)
        _launch("max_pool", x.dtype, y.size, (x, y, np.int64(x.shape[0] * x.shape[1])) + _geo_args(geo))
        return y

    return run


def max_pool_backward(generic):
    """CUDA kernel of ``max_pool_backward``: argmax recomputed and gradient scattered in one launch."""

    def run(xp, g, x, *, kernel_size, stride, padding, dilation, ceil_mode):
        if not _source.supported(g, x):
            return generic(xp, g, x, kernel_size=kernel_size, stride=stride, padding=padding, dilation=dilation,
                           ceil_mode=ceil_mode)
        if xp is np:
            _, arg = window_max_reference(x, kernel_size, g.shape[2:], stride, padding, dilation)
            gx = np.zeros((x.shape[0] * x.shape[1], int(np.prod(x.shape[2:]))), _source.acc_dtype(x.dtype))
            rows = np.broadcast_to(np.arange(gx.shape[0])[:, None], (gx.shape[0], arg[0, 0].size))
            arg, gv = arg.reshape(gx.shape[0], -1), g.reshape(gx.shape[0], -1)
            np.add.at(gx, (rows[arg >= 0], arg[arg >= 0]), gv[arg >= 0])  # the kernel's atomicAdd
            return gx.reshape(x.shape).astype(x.dtype)
        x, g = xp.ascontiguousarray(x), xp.ascontiguousarray(g)
        gx = xp.zeros(x.shape, dtype=_source.acc_dtype(x.dtype))
        geo = geometry(x.shape[2:], kernel_size, g.shape[2:], stride, padding, dilation)
        _launch("max_pool_backward", x.dtype, g.size,
                (g, x, gx, np.int64(x.shape[0] * x.shape[1])) + _geo_args(geo))
        return gx.astype(x.dtype, copy=False)

    return run
