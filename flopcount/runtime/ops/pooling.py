"""Max/avg pooling 1d/2d/3d and adaptive pooling.

Windows are read one kernel position at a time (``_window.windows``: strided views, no pixel
loops); 1-d and 2-d float max pools on numpy arrays run the compiled kernel of ``cpu_kernels``
where numba is there (the depthwise conv's wide grid, with a running maximum); adaptive windows, whose sizes vary, are separable per dim: a small averaging matrix per
dim for the average, a gather of each dim's windows for the max.

Cost (COUNTING.md): max pool numel(out)·(prod(K) − 1) comparisons; avg pool numel(out)·prod(K)
(the adds and one divide per output); adaptive avg pool numel(in) + numel(out); adaptive max
pool the same comparisons as a max pool, window by window. The backward ops redo the argmax
(max) and scatter one add per window element.
"""

from __future__ import annotations

__all__ = ["max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d",
           "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d",
           "adaptive_max_pool1d", "adaptive_max_pool2d", "adaptive_max_pool3d"]  # the functional API

from math import prod

import numpy as np

from .. import cpu_kernels
from ..cuda import kernels as cuda_kernels
from ..dispatch import apply
from ..errors import ShapeError, UnsupportedOpError
from ..registry import Op, Spec, io_cost, numel, register_op
from ..sbp import linear_per_channel, per_channel
from ._helpers import batched, check_float, check_ints, ntuple, same_spec, unbatched
from .elementwise import select
from ._scratch import scratch, scratch_zeros
from ._window import FlatWindows, out_size


# --- shape checks ------------------------------------------------------------------------------

def _check_input(op: str, x, nd: int) -> None:
    if x.ndim != nd + 2:
        raise ShapeError(f"{op}: expects a (N, C, *spatial) input with {nd} spatial dims, got {x.shape}")


def _pool_out(op: str, x, kernel, stride, padding, dilation, ceil_mode) -> tuple:
    check_ints(op, kernel_size=kernel, stride=stride, padding=padding, dilation=dilation)
    nd = len(kernel)
    _check_input(op, x, nd)
    if not len(stride) == len(padding) == len(dilation) == nd:
        raise ShapeError(f"{op}: kernel_size {kernel}, stride {stride}, padding {padding} and dilation "
                         f"{dilation} need {nd} values each")
    if any(k < 1 for k in kernel) or any(s < 1 for s in stride) or any(d < 1 for d in dilation):
        raise ShapeError(f"{op}: kernel_size {kernel}, stride {stride} and dilation {dilation} must be positive")
    if any(p < 0 or p > k // 2 for p, k in zip(padding, kernel)):
        raise ShapeError(f"{op}: padding {padding} should be at most half of kernel_size {kernel}")
    out = tuple(out_size(n, k, s, p, d, ceil_mode)
                for n, k, s, p, d in zip(x.shape[2:], kernel, stride, padding, dilation))
    if any(o <= 0 for o in out):
        raise ShapeError(f"{op}: input {x.shape} is too small for kernel_size {kernel} with stride {stride}, "
                         f"padding {padding}, dilation {dilation} (output size {out})")
    return out


def _lowest(dtype) -> float:
    return -np.inf if dtype.kind == "f" else np.iinfo(dtype).min


# --- max pool ----------------------------------------------------------------------------------

# planes per block of the CPU max pool kernels: each kernel position's pass over a block finds
# the running maximum, argmax and masks still in cache, where whole-batch passes stream each of
# them through memory once per position (blocks halved resnet's stem pool, forward and
# backward; benchmarks/RESULTS.md, "Figures behind design choices in the code")
BLOCK_BYTES = 2**20


def _plane_blocks(xp, kernel, out_spatial: tuple, dtype, *arrays):
    """``kernel(*arrays)`` run on blocks of the (N·C) planes of ``arrays`` (each (N, C, *S)),
    the blocks' results (N', C', *out_spatial) written into one (N, C, *out_spatial) array.
    Planes are independent in pooling, so the blocks compute exactly what one call would."""
    n, c = arrays[0].shape[:2]
    plane_bytes = max(prod(a.shape[2:]) * a.dtype.itemsize for a in arrays)
    block = max(1, BLOCK_BYTES // max(plane_bytes, 1))
    if xp is not np or block >= n * c:  # a GPU has no cache to block for
        return kernel(*arrays)
    flat = [a.reshape((1, n * c) + tuple(a.shape[2:])) for a in arrays]
    result = np.empty((1, n * c) + tuple(out_spatial), dtype=dtype)
    for start in range(0, n * c, block):
        part = (slice(None), slice(start, start + block))
        result[part] = kernel(*[a[part] for a in flat])
    return result.reshape((n, c) + tuple(out_spatial))


def _flat(x, kernel, out, stride, padding, dilation) -> FlatWindows:
    """Windows as contiguous ranges (see FlatWindows), holding the whole padded input so the
    same grid also serves the scatter of a backward pass."""
    size = tuple(x.shape[2:])
    return FlatWindows(tuple(kernel), tuple(out), tuple(stride), tuple(padding), tuple(dilation), size,
                       extent=tuple(n + p for n, p in zip(size, padding)))


def _compiled_max_pool(xp, x, out, kernel, stride, padding, dilation):
    """The 1-d or 2-d float max pool by the compiled kernel, or None where there is none (numba
    missing or turned off, CuPy arrays, 3-d pools, other dtypes)."""
    compiled = cpu_kernels.kernel("pooling", xp)
    if compiled is None or x.ndim not in (3, 4) or x.dtype not in (np.float32, np.float64):
        return None
    if x.ndim == 3:  # a 1-d pool is a 2-d one over maps one row high
        return compiled.max_pool2d(x[:, :, None], (1,) + tuple(out), (1,) + tuple(kernel), (1,) + tuple(stride),
                                   (0,) + tuple(padding), (1,) + tuple(dilation))[:, :, 0]
    return compiled.max_pool2d(x, out, kernel, stride, padding, dilation)


def _argmax_windows(xp, fw, x):
    """(max, index of the kernel position holding it) on ``fw``'s wide grid: the first
    maximum in scan order, as PyTorch, and a NaN wins over numbers.

    Branch-free: a position that beats every earlier one is the argmax so far, so the argmax is
    the largest such position, ``arg = max(arg, i·better)``; ``best`` is the running maximum
    (numpy's ``maximum`` keeps NaN). Boolean-mask writes and ``where`` branch per element and
    ran several times slower."""
    nan_possible = x.dtype.kind == "f" and not bool(xp.isfinite(x.sum()))
    planes = fw.gather(xp, x, _lowest(x.dtype))
    shape = x.shape[:2] + (fw.length,)
    best = scratch(xp, "wide", shape, x.dtype)
    best[...] = fw.view(planes, 0)
    arg = scratch_zeros(xp, "arg", shape, np.min_scalar_type(len(fw.places)))
    better, candidate = scratch(xp, "mask", shape, bool), scratch(xp, "candidate", shape, arg.dtype)
    for i in range(1, len(fw.places)):
        view = fw.view(planes, i)
        xp.greater(view, best, out=better)
        if nan_possible:
            better |= view != view
        xp.maximum(best, view, out=best)
        xp.multiply(better, arg.dtype.type(i), out=candidate)
        xp.maximum(arg, candidate, out=arg)
    return best, arg


@register_op("max_pool", ptflops="numel_in")
class MaxPool(Op):
    """N-d max pooling of x (N, C, *S) with PyTorch's kernel_size/stride/padding/dilation/ceil_mode."""

    def shape(x, *, kernel_size, stride, padding, dilation, ceil_mode):
        out = _pool_out("max_pool", x, kernel_size, stride, padding, dilation, ceil_mode)
        return Spec(x.shape[:2] + out, x.dtype, x.device)

    def forward(xp, x, *, kernel_size, stride, padding, dilation, ceil_mode):
        out = _pool_out("max_pool", x, kernel_size, stride, padding, dilation, ceil_mode)
        y = _compiled_max_pool(xp, x, out, kernel_size, stride, padding, dilation)
        if y is not None:
            return y

        def kernel(x):
            fw = _flat(x, kernel_size, out, stride, padding, dilation)
            planes = fw.gather(xp, x, _lowest(x.dtype))
            y = scratch(xp, "wide", x.shape[:2] + (fw.length,), x.dtype)
            y[...] = fw.view(planes, 0)
            for i in range(1, len(fw.places)):
                xp.maximum(y, fw.view(planes, i), out=y)  # maximum keeps NaN
            return fw.to_outputs(y).copy()

        return _plane_blocks(xp, kernel, out, x.dtype, x)

    kernels = {"cuda": cuda_kernels.max_pool(forward)}

    def vjp(g, out, x, *, kernel_size, stride, padding, dilation, ceil_mode):
        return apply(MaxPoolBackward, g, x, kernel_size=kernel_size, stride=stride, padding=padding,
                     dilation=dilation, ceil_mode=ceil_mode)

    def cost(out, x, *, kernel_size, stride, padding, dilation, ceil_mode):
        # a window of prod(K) elements takes prod(K) - 1 comparisons
        return io_cost(out, (x,), flops=numel(out) * (prod(kernel_size) - 1))

    def sbp(out, x, **attrs):
        return per_channel((x,))


@register_op("max_pool_backward")
class MaxPoolBackward(Op):
    """The gradient of max_pool: each output gradient goes to its window's (first) maximum."""
    backward = True  # dispatched by a vjp

    vjp = None  # second derivatives of max pooling are not supported

    def shape(g, x, *, kernel_size, stride, padding, dilation, ceil_mode):
        out = _pool_out("max_pool_backward", x, kernel_size, stride, padding, dilation, ceil_mode)
        if tuple(g.shape) != x.shape[:2] + out:
            raise ShapeError(f"max_pool_backward: gradient {g.shape} does not fit input {x.shape} "
                             f"(expects {x.shape[:2] + out})")
        return same_spec(x)

    def forward(xp, g, x, *, kernel_size, stride, padding, dilation, ceil_mode):
        def kernel(g, x):
            fw = _flat(x, kernel_size, g.shape[2:], stride, padding, dilation)
            _, arg = _argmax_windows(xp, fw, x)
            g_wide = fw.from_outputs(xp, g)  # zeros in the grid's extra entries: they add nothing
            acc = fw.zero_planes(xp, x.shape[:2], g.dtype, role="acc")
            zero = xp.zeros((), dtype=g.dtype)
            for i in range(len(fw.places)):
                fw.view(acc, i)[...] += select(xp, arg == i, g_wide, zero)
            return fw.scatter(xp, acc, g.dtype)

        return _plane_blocks(xp, kernel, x.shape[2:], g.dtype, g, x)

    kernels = {"cuda": cuda_kernels.max_pool_backward(forward)}

    def cost(out, g, x, *, kernel_size, stride, padding, dilation, ceil_mode):
        # the forward comparisons again (to find the argmax), then one add per output gradient
        return io_cost(out, (g, x), flops=numel(g) * (prod(kernel_size) - 1) + numel(g))

    def sbp(out, g, x, **attrs):
        return per_channel((g, x))


# --- avg pool ----------------------------------------------------------------------------------

def _avg_divisor(size, kernel, stride, padding, out, count_include_pad, divisor_override):
    """The divisor of every output (a numpy array of shape ``out``), PyTorch's rule: the window
    clipped to the padded input, or to the input itself without ``count_include_pad``."""
    if divisor_override:
        return np.full(out, float(divisor_override))
    divisor = np.ones(out)
    for d, (n, k, s, p, o) in enumerate(zip(size, kernel, stride, padding, out)):
        start = np.arange(o) * s - p
        end = np.minimum(start + k, n + p)
        counts = end - start if count_include_pad else np.minimum(end, n) - np.maximum(start, 0)
        divisor = divisor * counts.reshape((-1,) + (1,) * (len(out) - d - 1))
    return divisor


@register_op("avg_pool", ptflops="numel_in")
class AvgPool(Op):
    """N-d average pooling with PyTorch's ceil_mode, count_include_pad and divisor_override."""

    def shape(x, *, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
        check_float("avg_pool", x)
        ones = (1,) * len(kernel_size)
        out = _pool_out("avg_pool", x, kernel_size, stride, padding, ones, ceil_mode)
        if divisor_override is not None and divisor_override == 0:
            raise ShapeError("avg_pool: divisor_override must not be zero")
        return Spec(x.shape[:2] + out, x.dtype, x.device)

    def forward(xp, x, *, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
        ones = (1,) * len(kernel_size)
        out = _pool_out("avg_pool", x, kernel_size, stride, padding, ones, ceil_mode)
        fw = _flat(x, kernel_size, out, stride, padding, ones)
        planes = fw.gather(xp, x)
        total = scratch(xp, "wide", x.shape[:2] + (fw.length,), x.dtype)
        total[...] = fw.view(planes, 0)
        for i in range(1, len(fw.places)):
            total += fw.view(planes, i)
        divisor = _avg_divisor(x.shape[2:], kernel_size, stride, padding, out, count_include_pad, divisor_override)
        return fw.to_outputs(total) / xp.asarray(divisor, dtype=x.dtype)

    def vjp(g, out, x, *, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
        return apply(AvgPoolBackward, g, input_size=tuple(x.shape[2:]), kernel_size=kernel_size,
                     stride=stride, padding=padding, ceil_mode=ceil_mode,
                     count_include_pad=count_include_pad, divisor_override=divisor_override)

    def cost(out, x, *, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
        # prod(K) - 1 adds and one divide per output
        return io_cost(out, (x,), flops=numel(out) * prod(kernel_size))

    sbp = linear_per_channel


@register_op("avg_pool_backward")
class AvgPoolBackward(Op):
    """The gradient of avg_pool: each output gradient, divided, added to its window's elements."""
    backward = True  # dispatched by a vjp

    def shape(g, *, input_size, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
        out = tuple(out_size(n, k, s, p, 1, ceil_mode) for n, k, s, p in zip(input_size, kernel_size, stride, padding))
        if tuple(g.shape[2:]) != out:
            raise ShapeError(f"avg_pool_backward: gradient {g.shape} does not fit input size {input_size} "
                             f"(expects spatial size {out})")
        return Spec(tuple(g.shape[:2]) + tuple(input_size), g.dtype, g.device)

    def forward(xp, g, *, input_size, kernel_size, stride, padding, ceil_mode, count_include_pad,
                divisor_override):
        out = g.shape[2:]
        divisor = _avg_divisor(input_size, kernel_size, stride, padding, out, count_include_pad, divisor_override)
        ones = (1,) * len(out)
        fw = FlatWindows(tuple(kernel_size), tuple(out), tuple(stride), tuple(padding), ones, tuple(input_size),
                         extent=tuple(n + p for n, p in zip(input_size, padding)))
        share = fw.from_outputs(xp, g / xp.asarray(divisor, dtype=g.dtype))
        acc = fw.zero_planes(xp, g.shape[:2], g.dtype, role="acc")
        for i in range(len(fw.places)):
            fw.view(acc, i)[...] += share
        return fw.scatter(xp, acc, g.dtype)

    def vjp(gg, out, g, *, input_size, kernel_size, stride, padding, ceil_mode, count_include_pad,
            divisor_override):
        # linear in g: its adjoint is the average pool itself
        return apply(AvgPool, gg, kernel_size=kernel_size, stride=stride, padding=padding, ceil_mode=ceil_mode,
                     count_include_pad=count_include_pad, divisor_override=divisor_override)

    def cost(out, g, *, input_size, kernel_size, stride, padding, ceil_mode, count_include_pad,
             divisor_override):
        # one divide per output gradient, then one add per window element
        return io_cost(out, (g,), flops=numel(g) * (prod(kernel_size) + 1))

    sbp = linear_per_channel


# --- adaptive pools ----------------------------------------------------------------------------

def _adaptive_bounds(size: int, out: int):
    """PyTorch's adaptive windows along one dim: [floor(i·L/o), ceil((i+1)·L/o))."""
    i = np.arange(out)
    return (i * size) // out, -((-(i + 1) * size) // out)


def _mean_matrix(size: int, out: int) -> np.ndarray:
    """(out, size) matrix whose row i averages window i."""
    start, end = _adaptive_bounds(size, out)
    cols = np.arange(size)
    inside = (cols >= start[:, None]) & (cols < end[:, None])
    return inside / (end - start)[:, None]


def _tiles(in_size, out_size):
    """(N, C, o0, k0, o1, k1, ...) split of an input whose windows tile it exactly (L = o·k),
    as for a global pool; None when some dim does not divide."""
    if any(n % o for n, o in zip(in_size, out_size)):
        return None
    return tuple(v for n, o in zip(in_size, out_size) for v in (o, n // o))


def _per_dim(xp, y, matrices, dtype):
    """Apply one (new, old) matrix along each spatial dim of y (N, C, *spatial)."""
    for d, m in enumerate(matrices):
        axis = 2 + d
        moved = xp.moveaxis(y, axis, -1)
        y = xp.moveaxis(xp.matmul(moved, xp.asarray(m.T, dtype=dtype)), -1, axis)
    return xp.ascontiguousarray(y)


def _check_adaptive(op, x, output_size):
    _check_input(op, x, len(output_size))
    if any(o < 1 for o in output_size):
        raise ShapeError(f"{op}: output_size {output_size} must be positive (input {x.shape})")
    if any(n < 1 for n in x.shape[2:]):
        raise ShapeError(f"{op}: input {x.shape} has an empty spatial dim")


@register_op("adaptive_avg_pool", ptflops="numel_in")
class AdaptiveAvgPool(Op):
    """Average over PyTorch's adaptive windows so the output is exactly ``output_size``."""

    def shape(x, *, output_size):
        check_float("adaptive_avg_pool", x)
        _check_adaptive("adaptive_avg_pool", x, output_size)
        return Spec(x.shape[:2] + tuple(output_size), x.dtype, x.device)

    def forward(xp, x, *, output_size):
        tiles = _tiles(x.shape[2:], output_size)
        if tiles is not None and all(o == 1 for o in output_size):  # a global pool: one mean per plane
            compiled = cpu_kernels.kernel("pooling", xp) if x.dtype in (np.float32, np.float64) else None
            if compiled is not None:
                out = np.empty(x.shape[:2], x.dtype)
                compiled.plane_means(x.reshape(prod(x.shape[:2]), -1), out.reshape(-1))
                return out.reshape(x.shape[:2] + tuple(output_size))
        if tiles is not None:  # equal windows that tile the input: a plain mean
            return x.reshape(x.shape[:2] + tiles).mean(axis=tuple(range(3, 3 + len(tiles), 2)))
        mats = [_mean_matrix(n, o) for n, o in zip(x.shape[2:], output_size)]
        return _per_dim(xp, x, mats, x.dtype)

    def vjp(g, out, x, *, output_size):
        return apply(AdaptiveAvgPoolBackward, g, input_size=tuple(x.shape[2:]))

    def cost(out, x, *, output_size):
        # COUNTING.md: every input element added once, every output divided once
        return io_cost(out, (x,), flops=numel(x) + numel(out))

    sbp = linear_per_channel


@register_op("adaptive_avg_pool_backward")
class AdaptiveAvgPoolBackward(Op):
    """The gradient of adaptive_avg_pool: each output gradient spread evenly over its window."""
    backward = True  # dispatched by a vjp

    def shape(g, *, input_size):
        _check_adaptive("adaptive_avg_pool_backward", g, tuple(input_size))
        return Spec(tuple(g.shape[:2]) + tuple(input_size), g.dtype, g.device)

    def forward(xp, g, *, input_size):
        tiles = _tiles(input_size, g.shape[2:])
        if tiles is not None:  # equal windows that tile the input: each element gets g / window size
            share = g / (prod(input_size) // prod(g.shape[2:]))
            per_tile = share.reshape(g.shape[:2] + tuple(v for o in g.shape[2:] for v in (o, 1)))
            return xp.broadcast_to(per_tile, g.shape[:2] + tiles).reshape(g.shape[:2] + tuple(input_size))
        mats = [_mean_matrix(n, o).T for n, o in zip(input_size, g.shape[2:])]
        return _per_dim(xp, g, mats, g.dtype)

    def vjp(gg, out, g, *, input_size):
        return apply(AdaptiveAvgPool, gg, output_size=tuple(g.shape[2:]))  # the adjoint of the adjoint

    def cost(out, g, *, input_size):
        # the forward's count mirrored: one divide per output gradient, one add per input element
        return io_cost(out, (g,), flops=numel(out) + numel(g))

    sbp = linear_per_channel


def _max_windows_index(size: int, out: int) -> np.ndarray:
    """(out, longest window) input positions of each adaptive window; short windows repeat their
    last element, which leaves the max and the first argmax unchanged."""
    start, end = _adaptive_bounds(size, out)
    width = int((end - start).max())
    return np.minimum(start[:, None] + np.arange(width), (end - 1)[:, None])


def _gather_windows(xp, y, d, index):
    """Along spatial dim d of y, replace the L elements by (out, width) windows."""
    axis = 2 + d
    taken = xp.take(y, xp.asarray(index.ravel()), axis=axis)
    return taken.reshape(y.shape[:axis] + index.shape + y.shape[axis + 1:])


def _adaptive_comparisons(x_shape, output_size) -> int:
    # per (n, c): sum over windows of (window size - 1); windows are products of per-dim ranges
    sums = 1
    for n, o in zip(x_shape[2:], output_size):
        start, end = _adaptive_bounds(n, o)
        sums *= int((end - start).sum())
    return prod(x_shape[:2]) * (sums - prod(output_size))


@register_op("adaptive_max_pool", ptflops="numel_in")
class AdaptiveMaxPool(Op):
    """Max over PyTorch's adaptive windows (separable: the max of per-dim maxima)."""

    def shape(x, *, output_size):
        _check_adaptive("adaptive_max_pool", x, output_size)
        return Spec(x.shape[:2] + tuple(output_size), x.dtype, x.device)

    def forward(xp, x, *, output_size):
        y = x
        for d, (n, o) in enumerate(zip(x.shape[2:], output_size)):
            y = _gather_windows(xp, y, d, _max_windows_index(n, o)).max(axis=3 + d)
        return y

    def vjp(g, out, x, *, output_size):
        return apply(AdaptiveMaxPoolBackward, g, x)

    def cost(out, x, *, output_size):
        # as max pool: a window of k elements takes k - 1 comparisons
        return io_cost(out, (x,), flops=_adaptive_comparisons(x.shape, output_size))

    def sbp(out, x, **attrs):
        return per_channel((x,))


@register_op("adaptive_max_pool_backward")
class AdaptiveMaxPoolBackward(Op):
    """The gradient of adaptive_max_pool: each output gradient goes to its window's first max."""
    backward = True  # dispatched by a vjp

    vjp = None  # second derivatives of max pooling are not supported

    def shape(g, x):
        if g.ndim != x.ndim or tuple(g.shape[:2]) != tuple(x.shape[:2]):
            raise ShapeError(f"adaptive_max_pool_backward: gradient {g.shape} does not fit input {x.shape}")
        return same_spec(x)

    def forward(xp, g, x):
        nd = x.ndim - 2
        out = g.shape[2:]
        index = [_max_windows_index(n, o) for n, o in zip(x.shape[2:], out)]
        full = x
        for d in range(nd):  # every window element: (N, C, o0, k0, o1, k1, ...)
            full = _gather_windows(xp, full, 2 * d, index[d])
        order = (0, 1) + tuple(2 + 2 * d for d in range(nd)) + tuple(3 + 2 * d for d in range(nd))
        widths = tuple(i.shape[1] for i in index)
        flat = full.transpose(order).reshape(g.shape + (prod(widths),))
        arg = xp.argmax(flat, axis=-1)
        # input position of each argmax, then one flat index into x for a single scatter-add
        target = xp.arange(g.shape[0] * g.shape[1]).reshape(g.shape[:2] + (1,) * nd)
        for d, k in enumerate(xp.unravel_index(arg, widths)):
            o = xp.arange(out[d]).reshape((-1,) + (1,) * (nd - d - 1))
            target = target * x.shape[2 + d] + xp.asarray(index[d])[o, k]
        summed = xp.bincount(target.ravel(), weights=g.ravel(), minlength=int(np.prod(x.shape)))
        return summed.reshape(x.shape).astype(g.dtype)

    def cost(out, g, x):
        # the forward comparisons again, then one add per output gradient
        return io_cost(out, (g, x), flops=_adaptive_comparisons(x.shape, g.shape[2:]) + numel(g))

    def sbp(out, g, x):
        return per_channel((g, x))


# --- functional API ----------------------------------------------------------------------------

def _kernel_and_stride(fn: str, kernel_size, stride, nd: int) -> tuple:
    """The window's kernel and stride as ``nd`` ints; no stride (None or empty) means the kernel's."""
    kernel = ntuple(fn, "kernel_size", kernel_size, nd)
    if stride is None or stride == () or stride == []:
        return kernel, kernel
    return kernel, ntuple(fn, "stride", stride, nd)


def _no_indices(fn: str, return_indices: bool) -> None:
    if return_indices:
        raise UnsupportedOpError(f"{fn}: return_indices=True is not supported (the runtime has no op "
                                 f"returning the argmax positions); use return_indices=False")


def _max_pool(nd, fn, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices):
    _no_indices(fn, return_indices)
    x, added = batched(fn, input, nd)
    kernel, stride = _kernel_and_stride(fn, kernel_size, stride, nd)
    y = apply(MaxPool, x, kernel_size=kernel, stride=stride, padding=ntuple(fn, "padding", padding, nd),
              dilation=ntuple(fn, "dilation", dilation, nd), ceil_mode=bool(ceil_mode))
    return unbatched(y, added)


def _avg_pool(nd, fn, input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    x, added = batched(fn, input, nd)
    kernel, stride = _kernel_and_stride(fn, kernel_size, stride, nd)
    y = apply(AvgPool, x, kernel_size=kernel, stride=stride, padding=ntuple(fn, "padding", padding, nd),
              ceil_mode=bool(ceil_mode), count_include_pad=bool(count_include_pad),
              divisor_override=None if divisor_override is None else int(divisor_override))
    return unbatched(y, added)


def _adaptive(op, nd, fn, input, output_size):
    x, added = batched(fn, input, nd)
    sizes = (output_size,) * nd if isinstance(output_size, int) or output_size is None else tuple(output_size)
    if len(sizes) == 1:
        sizes = sizes * nd
    if len(sizes) != nd:
        raise ShapeError(f"{fn}: output_size needs 1 or {nd} values, got {output_size}")
    sizes = tuple(x.shape[2 + i] if s is None else int(s) for i, s in enumerate(sizes))  # None keeps a dim
    return unbatched(apply(op, x, output_size=sizes), added)


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """1-d max pooling (PyTorch's ``F.max_pool1d``); ``stride`` defaults to ``kernel_size``.

    >>> import flopcount.runtime as rt
    >>> max_pool1d(rt.tensor([[[1.0, 3.0, 2.0, 5.0, 4.0]]]), 2).tolist()
    [[[3.0, 5.0]]]
    """
    return _max_pool(1, "max_pool1d", input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """2-d max pooling (PyTorch's ``F.max_pool2d``).

    >>> import flopcount.runtime as rt
    >>> max_pool2d(rt.randn(1, 64, 112, 112), 3, stride=2, padding=1).shape
    (1, 64, 56, 56)
    """
    return _max_pool(2, "max_pool2d", input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """3-d max pooling (PyTorch's ``F.max_pool3d``)."""
    return _max_pool(3, "max_pool3d", input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    """1-d average pooling (PyTorch's ``F.avg_pool1d``).

    >>> import flopcount.runtime as rt
    >>> avg_pool1d(rt.tensor([[[1.0, 3.0, 2.0, 6.0]]]), 2).tolist()
    [[[2.0, 4.0]]]
    """
    return _avg_pool(1, "avg_pool1d", input, kernel_size, stride, padding, ceil_mode, count_include_pad, None)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """2-d average pooling (PyTorch's ``F.avg_pool2d``)."""
    return _avg_pool(2, "avg_pool2d", input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                     divisor_override)


def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """3-d average pooling (PyTorch's ``F.avg_pool3d``)."""
    return _avg_pool(3, "avg_pool3d", input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                     divisor_override)


def adaptive_avg_pool1d(input, output_size):
    """Average pooling to exactly ``output_size`` (PyTorch's ``F.adaptive_avg_pool1d``).

    >>> import flopcount.runtime as rt
    >>> adaptive_avg_pool1d(rt.tensor([[[1.0, 2.0, 3.0, 4.0, 5.0]]]), 2).tolist()
    [[[2.0, 4.0]]]
    """
    return _adaptive(AdaptiveAvgPool, 1, "adaptive_avg_pool1d", input, output_size)


def adaptive_avg_pool2d(input, output_size):
    """2-d adaptive average pooling; ``None`` in ``output_size`` keeps that dim.

    >>> import flopcount.runtime as rt
    >>> adaptive_avg_pool2d(rt.randn(2, 512, 7, 7), 1).shape
    (2, 512, 1, 1)
    """
    return _adaptive(AdaptiveAvgPool, 2, "adaptive_avg_pool2d", input, output_size)


def adaptive_avg_pool3d(input, output_size):
    """3-d adaptive average pooling."""
    return _adaptive(AdaptiveAvgPool, 3, "adaptive_avg_pool3d", input, output_size)


def adaptive_max_pool1d(input, output_size, return_indices=False):
    """Max pooling to exactly ``output_size`` (PyTorch's ``F.adaptive_max_pool1d``)."""
    _no_indices("adaptive_max_pool1d", return_indices)
    return _adaptive(AdaptiveMaxPool, 1, "adaptive_max_pool1d", input, output_size)


def adaptive_max_pool2d(input, output_size, return_indices=False):
    """2-d adaptive max pooling (PyTorch's ``F.adaptive_max_pool2d``)."""
    _no_indices("adaptive_max_pool2d", return_indices)
    return _adaptive(AdaptiveMaxPool, 2, "adaptive_max_pool2d", input, output_size)


def adaptive_max_pool3d(input, output_size, return_indices=False):
    """3-d adaptive max pooling (PyTorch's ``F.adaptive_max_pool3d``)."""
    _no_indices("adaptive_max_pool3d", return_indices)
    return _adaptive(AdaptiveMaxPool, 3, "adaptive_max_pool3d", input, output_size)
