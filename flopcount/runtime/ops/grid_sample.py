"""``grid_sample``: values of ``x`` (N, C, *spatial) read at the normalized coordinates of a
grid (N, *out, d), as ``torch.nn.functional.grid_sample`` and ONNX's GridSample (2-d and 3-d).

The grid's last axis lists coordinates in reverse dim order (x, y[, z]) in [-1, 1]; with
``align_corners`` -1 and 1 are the centres of the corner pixels, else their outer edges.
``mode``: nearest (round half to even), linear or cubic (Keys, a = -0.75); ``padding_mode``:
zeros (taps outside read 0), border (coordinates clamped) or reflection (mirrored at the
borders). Every output element is a weighted sum of T taps per dim (1, 2 or 4).

Cost (COUNTING.md): 2·T^d − 1 FLOPs per output element (T^d multiplies, T^d − 1 adds).
"""

from __future__ import annotations

__all__ = ["grid_sample"]

import itertools

import numpy as np

from ..dispatch import apply
from ..errors import ShapeError
from ..registry import Op, Spec, io_cost, numel, register_op
from ._helpers import check_float, upcast_half

MODES = {"nearest": 1, "linear": 2, "cubic": 4}
PADDING = ("zeros", "border", "reflection")
CUBIC_A = -0.75


def _reflect(xp, x, low: float, high: float):
    """x mirrored at ``low`` and ``high`` until it lies between them."""
    span = high - low
    if span <= 0:
        return xp.zeros_like(x) + low
    below, above = x < low, x > high
    dist = xp.where(below, low - x, x - high)
    flips = xp.floor(dist / span)
    rest = dist - flips * span
    even = (flips % 2) == 0
    from_below = xp.where(even, low + rest, high - rest)
    from_above = xp.where(even, high - rest, low + rest)
    return xp.where(below, from_below, xp.where(above, from_above, x))


def cubic_weights(t, a: float = CUBIC_A) -> list:
    """The weights of the four taps around a point ``t`` past a pixel (in [0, 1)): Keys' cubic
    convolution with parameter ``a`` (a number or an array of points)."""
    return [((a * (t + 1) - 5 * a) * (t + 1) + 8 * a) * (t + 1) - 4 * a,
            ((a + 2) * t - (a + 3)) * t * t + 1,
            ((a + 2) * (1 - t) - (a + 3)) * (1 - t) * (1 - t) + 1,
            ((a * (2 - t) - 5 * a) * (2 - t) + 8 * a) * (2 - t) - 4 * a]


def _taps(xp, coord, size: int, mode: str, padding: str, align_corners: bool):
    """[(index, weight, inside)] along one dim: the source pixels of every output position,
    their weights, and whether the pixel exists (zeros padding reads 0 elsewhere)."""
    low, high = (0.0, size - 1.0) if align_corners else (-0.5, size - 0.5)
    x = (coord + 1) / 2 * (size - 1) if align_corners else ((coord + 1) * size - 1) / 2
    if mode == "nearest":
        x = xp.rint(x)
    outside = (x < low) | (x > high)
    if padding == "border":
        x = xp.where(outside, xp.clip(x, 0, size - 1), x)
    elif padding == "reflection":
        x = xp.where(outside, _reflect(xp, x, low, high), x)
    if mode == "nearest":
        starts, weights = [xp.trunc(x)], [xp.ones_like(x)]
    else:
        base = xp.floor(x)
        t = x - base
        if mode == "linear":
            starts, weights = [base, base + 1], [1 - t, t]
        else:
            starts, weights = [base - 1, base, base + 1, base + 2], cubic_weights(t)
    out = []
    for start, weight in zip(starts, weights):
        index = start.astype(np.int64)
        if padding == "border":
            index = xp.clip(index, 0, size - 1)
        elif padding == "reflection":
            index = _reflect(xp, index.astype(x.dtype), low, high).astype(np.int64)
        inside = (index >= 0) & (index < size)
        out.append((xp.clip(index, 0, size - 1), weight, inside))
    return out


@register_op("grid_sample")
class GridSample(Op):
    def shape(x, grid, *, mode, padding_mode, align_corners):
        check_float("grid_sample", x)
        nd = x.ndim - 2
        if nd < 1 or grid.ndim != nd + 2 or grid.shape[0] != x.shape[0] or grid.shape[-1] != nd:
            raise ShapeError(f"grid_sample: grid {grid.shape} does not fit input {x.shape} (expected (N, *out, {nd}))")
        if mode not in MODES or padding_mode not in PADDING:
            raise ShapeError(f"grid_sample: mode {mode!r} / padding_mode {padding_mode!r} not in {sorted(MODES)} / "
                             f"{PADDING}")
        return Spec(x.shape[:2] + tuple(grid.shape[1:-1]), x.dtype, x.device)

    def forward(xp, x, grid, *, mode, padding_mode, align_corners):
        work = upcast_half(x)
        coords = upcast_half(grid).astype(work.dtype, copy=False)
        nd = x.ndim - 2
        n = x.shape[0]
        # channels last, so one advanced index picks (N, *out, C) for every tap at once
        source = xp.moveaxis(work, 1, -1)
        batch = xp.arange(n).reshape((n,) + (1,) * (grid.ndim - 2))
        per_dim = [_taps(xp, coords[..., nd - 1 - d], x.shape[2 + d], mode, padding_mode, align_corners)
                   for d in range(nd)]
        out = None
        for combo in itertools.product(*per_dim):
            weight = combo[0][1]
            inside = combo[0][2]
            for _, w, ok in combo[1:]:
                weight, inside = weight * w, inside & ok
            if padding_mode == "zeros":
                weight = xp.where(inside, weight, 0)
            term = source[(batch,) + tuple(index for index, _, _ in combo)] * weight[..., None]
            out = term if out is None else out + term
        return xp.moveaxis(out, -1, 1).astype(x.dtype, copy=False)

    vjp = None  # imported graphs are run for inference; no gradient is defined for grid sampling yet

    def cost(out, x, grid, *, mode, padding_mode, align_corners):
        taps = MODES[mode] ** (x.ndim - 2)
        return io_cost(out, (x, grid), flops=(2 * taps - 1) * numel(out))


def grid_sample(input, grid, mode: str = "bilinear", padding_mode: str = "zeros", align_corners: bool = False):
    """Sample ``input`` at the grid's normalized coordinates (PyTorch's names: "bilinear" and
    "bicubic" are linear and cubic).

    >>> x = rt.arange(4.0).reshape(1, 1, 2, 2)
    >>> grid_sample(x, rt.zeros(1, 1, 1, 2), align_corners=True).tolist()
    [[[[1.5]]]]
    """
    mode = {"bilinear": "linear", "bicubic": "cubic"}.get(mode, mode)
    return apply(GridSample, input, grid, mode=mode, padding_mode=padding_mode, align_corners=bool(align_corners))
