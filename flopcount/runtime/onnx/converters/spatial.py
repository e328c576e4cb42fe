"""Sampling grids and patches: GridSample, AffineGrid and Col2Im."""

from __future__ import annotations

import numpy as np

from ...ops import elementwise as ew
from ...ops import linalg, movement
from ...ops.grid_sample import grid_sample
from ...ops.indexing import getitem
from ...ops.scatter import scatter_elements
from ._base import constant, converter


@converter("GridSample")
def grid_sample_(ctx, x, grid):
    mode = {"bilinear": "linear", "bicubic": "cubic"}.get(ctx.attr("mode"), ctx.attr("mode"))
    return grid_sample(x, ew.cast(grid, x.dtype), mode, ctx.attr("padding_mode", "zeros"),
                       bool(ctx.attr("align_corners", 0)))


def _normalized(size: int, align_corners: bool) -> np.ndarray:
    """Pixel centres along one dim in [-1, 1] (corner centres at ±1 with ``align_corners``)."""
    if align_corners:
        return np.linspace(-1.0, 1.0, size) if size > 1 else np.zeros(1)
    return (2 * np.arange(size) + 1) / size - 1


@converter("AffineGrid")
def affine_grid(ctx, theta, size):
    """The sampling grid (N, *spatial, d) of the affine maps ``theta`` (N, d, d + 1): every
    output pixel's normalized coordinates (x, y[, z], 1) times thetaᵀ."""
    dims = ctx.ints(size, "input 'size'")
    spatial = dims[2:]
    align = bool(ctx.attr("align_corners", 0))
    axes = [_normalized(n, align) for n in spatial]          # in dim order (z,) y, x
    mesh = np.meshgrid(*axes, indexing="ij")
    base = np.stack([m for m in reversed(mesh)] + [np.ones_like(mesh[0])], axis=-1)  # (..., x, y[, z], 1)
    base = constant(base.reshape(-1, len(spatial) + 1).astype(theta.dtype.np))
    grid = linalg.matmul(base, movement.transpose(theta, 1, 2))   # (N, pixels, d)
    return movement.reshape(grid, (dims[0],) + tuple(spatial) + (len(spatial),))


@converter("Col2Im")
def col2im(ctx, x, image_shape, block_shape):
    """Sum the columns (N, C·prod(block), L) back into images (N, C, *image): each column
    element added at the pixel its block position and sliding position cover (im2col's
    adjoint), as one scatter-add with a constant map of positions."""
    image = ctx.ints(image_shape, "input 'image_shape'")
    block = ctx.ints(block_shape, "input 'block_shape'")
    nd = len(image)
    dilations = list(ctx.attr("dilations") or [1] * nd)
    strides = list(ctx.attr("strides") or [1] * nd)
    pads = list(ctx.attr("pads") or [0] * (2 * nd))
    padded = [n + pads[i] + pads[i + nd] for i, n in enumerate(image)]
    slides = [(p - (d * (k - 1) + 1)) // s + 1 for p, d, k, s in zip(padded, dilations, block, strides)]
    # position in the padded image of (block offset, sliding offset), per dim, then flattened
    coords = []
    for i in range(nd):
        k = np.arange(block[i]).reshape(-1, 1) * dilations[i]
        s = np.arange(slides[i]).reshape(1, -1) * strides[i]
        coords.append(k + s)                                         # (block_i, slides_i)
    grids = np.meshgrid(*[np.arange(b) for b in block], *[np.arange(s) for s in slides], indexing="ij")
    flat = np.zeros(grids[0].shape, dtype=np.int64)
    for i in range(nd):
        flat = flat * padded[i] + coords[i][grids[i], grids[nd + i]]
    index = flat.reshape(1, 1, -1)                                   # (1, 1, prod(block)·L)
    n, channels = x.shape[0], x.shape[1] // int(np.prod(block))
    values = movement.reshape(x, (n, channels, -1))
    target = constant(np.broadcast_to(index, values.shape).copy())
    zeros = constant(np.zeros((n, channels, int(np.prod(padded))), dtype=x.dtype.np))
    summed = movement.reshape(scatter_elements(zeros, 2, target, values, "add"), (n, channels) + tuple(padded))
    key = (slice(None), slice(None)) + tuple(slice(pads[i], pads[i] + image[i]) for i in range(nd))
    return getitem(summed, key)


