"""Layer primitives: ``conv_general_dilated`` (any dimension numbers, NHWC/HWIO as Flax
writes them, feature groups) as the runtime's ``conv`` on channels-first operands, and
``reduce_window_max``/``reduce_window_sum`` (Flax's ``max_pool``/``avg_pool``) as ``max_pool``
and ``avg_pool``, so an imported model is counted by the same rules as one written with
``rt.nn``. Layouts are moved with ``permute`` (a view: free), asymmetric padding with ``pad``.
"""

from __future__ import annotations

import math

import numpy as np

from ...dispatch import apply
from ...ops import movement
from ...ops.conv import Conv, ConvTranspose
from ...ops.pooling import AvgPool, MaxPool
from ._base import converter


def _inverse(perm) -> tuple:
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return tuple(inv)


def _pad_pairs(x, pairs, value: float):
    """``x`` (N, C, *spatial) padded by (before, after) per spatial dim."""
    return movement.pad(x, movement.pad_list(pairs), value=value)


@converter("conv_general_dilated")
def conv_general_dilated(ctx, x, w):
    p = ctx.params
    dn = p["dimension_numbers"]
    lhs, rhs, out = tuple(dn.lhs_spec), tuple(dn.rhs_spec), tuple(dn.out_spec)
    nd = x.ndim - 2
    dilated = any(d != 1 for d in p["lhs_dilation"])
    if p["batch_group_count"] != 1:
        raise ctx.unsupported(f"batch_group_count {p['batch_group_count']} is not supported")
    pairs = [tuple(int(v) for v in pair) for pair in p["padding"]]
    if any(lo < 0 or hi < 0 for lo, hi in pairs):
        raise ctx.unsupported(f"negative padding {pairs} is not supported")
    x = movement.permute(x, lhs)      # (N, C, *spatial)
    w = movement.permute(w, rhs)      # (O, I, *kernel)
    if dilated:
        return movement.permute(_transposed(ctx, x, w, pairs), _inverse(out))
    if all(lo == hi for lo, hi in pairs):
        padding = tuple(lo for lo, _ in pairs)
    else:
        x, padding = _pad_pairs(x, pairs, 0.0), (0,) * nd
    y = apply(Conv, x, w, None, stride=tuple(int(s) for s in p["window_strides"]), padding=padding,
              dilation=tuple(int(d) for d in p["rhs_dilation"]), groups=int(p["feature_group_count"]))
    return movement.permute(y, _inverse(out))


def _transposed(ctx, x, w, pairs):
    """A convolution of the input dilated by ``lhs_dilation`` (Flax's ConvTranspose,
    ``lax.conv_transpose``) as the runtime's ``conv_transpose``, which never multiplies the
    inserted zeros. With the kernel flipped and its channels swapped, the transposed conv
    without padding sums x[i]·w[j] into position m = i·s + j·d of a full output of length
    F = (n-1)·s + (k-1)·d + 1, and the dilated form's output o is m = o + p, p = (k-1)·d - lo.
    The transposed conv's padding q (it crops q at both ends) is as much of p as keeps every
    position read; the rest is zeros added or positions cropped at the ends: no arithmetic."""
    from ...ops import indexing

    p = ctx.params
    stride = tuple(int(s) for s in p["lhs_dilation"])
    dilation = tuple(int(d) for d in p["rhs_dilation"])
    if any(int(s) != 1 for s in p["window_strides"]) or int(p["feature_group_count"]) != 1:
        raise ctx.unsupported(f"lhs_dilation {stride} with window strides {tuple(p['window_strides'])} or "
                              f"{p['feature_group_count']} feature groups is not supported")
    kernel, sizes = tuple(w.shape[2:]), tuple(x.shape[2:])
    full = tuple((n - 1) * s + (k - 1) * d + 1 for n, s, k, d in zip(sizes, stride, kernel, dilation))
    want = tuple((n - 1) * s + 1 + lo + hi - (k - 1) * d      # the dilated form's output length
                 for n, s, (lo, hi), k, d in zip(sizes, stride, pairs, kernel, dilation))
    shift = tuple((k - 1) * d - lo for k, d, (lo, _) in zip(kernel, dilation, pairs))
    crop = tuple(max(0, min(t, f - m - t)) for t, f, m in zip(shift, full, want))
    spatial = tuple(range(2, w.ndim))
    flipped = movement.permute(movement.flip(w, spatial), (1, 0) + spatial)   # (I, O, *kernel)
    y = apply(ConvTranspose, x, flipped, None, stride=stride, padding=crop, output_padding=(0,) * len(stride),
              dilation=dilation, groups=1)
    offset = tuple(t - q for t, q in zip(shift, crop))   # y's position of the output's first
    if any(o < 0 for o in offset):
        y = _pad_pairs(y, [(max(-o, 0), 0) for o in offset], 0.0)
        offset = tuple(max(o, 0) for o in offset)
    lengths = tuple(n - o for n, o in zip(y.shape[2:], offset))
    if any(m > n for m, n in zip(want, lengths)):
        y = _pad_pairs(y, [(0, max(m - n, 0)) for m, n in zip(want, lengths)], 0.0)
    if any(offset) or any(m < n for m, n in zip(want, lengths)):
        y = indexing.getitem(y, (slice(None), slice(None)) + tuple(slice(o, o + m) for o, m in zip(offset, want)))
    return y


@converter("reduce_window_max", "reduce_window_sum")
def reduce_window(ctx, x):
    p = ctx.params
    window, strides = tuple(p["window_dimensions"]), tuple(p["window_strides"])
    pairs = [tuple(int(v) for v in pair) for pair in p["padding"]]
    if any(d != 1 for d in p["base_dilation"]):
        raise ctx.unsupported(f"base_dilation {tuple(p['base_dilation'])} is not supported")
    pooled = [i for i in range(x.ndim) if window[i] != 1 or strides[i] != 1 or pairs[i] != (0, 0)]
    if not pooled:
        return x
    if len(pooled) > 3:
        raise ctx.unsupported(f"a window over {len(pooled)} dims (at most 3) is not supported")
    others = [i for i in range(x.ndim) if i not in pooled]
    order = tuple(others + pooled)
    moved = movement.permute(x, order)
    lead = tuple(moved.shape[:len(others)])
    # the pool's (N, C, *spatial): as it is when two dims are not pooled (NHWC), else in one plane axis
    planes = moved if len(others) == 2 else \
        movement.reshape(moved, (1, math.prod(lead)) + tuple(moved.shape[len(others):]))
    kernel = tuple(window[i] for i in pooled)
    stride = tuple(strides[i] for i in pooled)
    dilation = tuple(int(p["window_dilation"][i]) for i in pooled)
    spatial = [pairs[i] for i in pooled]
    is_max = ctx.primitive == "reduce_window_max"
    if all(lo == hi and lo <= k // 2 for (lo, hi), k in zip(spatial, kernel)):
        padding = tuple(lo for lo, _ in spatial)
    else:
        fill = (-math.inf if x.dtype.is_floating_point else float(np.iinfo(x.dtype.np).min)) if is_max else 0.0
        planes, padding = _pad_pairs(planes, spatial, fill), (0,) * len(pooled)
    if is_max:
        y = apply(MaxPool, planes, kernel_size=kernel, stride=stride, padding=padding, dilation=dilation,
                  ceil_mode=False)
    else:
        if any(d != 1 for d in dilation):
            raise ctx.unsupported(f"a summed window with dilation {dilation} is not supported")
        # a window's sum: the average pool with divisor 1
        y = apply(AvgPool, planes, kernel_size=kernel, stride=stride, padding=padding, ceil_mode=False,
                  count_include_pad=True, divisor_override=1)
    y = movement.reshape(y, lead + tuple(y.shape[2:]))
    return movement.permute(y, _inverse(order))
