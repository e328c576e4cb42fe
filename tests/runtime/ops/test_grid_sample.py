"""grid_sample: every mode and padding mode against a direct per-pixel evaluation of the
formulas, and against PyTorch's grid_sample where it is installed."""

import itertools

import numpy as np
import pytest

import flopcount.runtime as rt
from flopcount.runtime.ops.grid_sample import grid_sample
from opcheck import Example, check_op, randn, run_example

X = randn(1, 2, 3, 4)
# coordinates inside, on and outside [-1, 1]
GRID = np.clip(randn(1, 2, 3, 2, seed=3) * 0.8, -1.3, 1.3)


def _pixel(plane, yy, xx, padding):
    h, w = plane.shape
    if padding == "border":
        yy, xx = min(max(yy, 0), h - 1), min(max(xx, 0), w - 1)
    return plane[yy, xx] if 0 <= yy < h and 0 <= xx < w else 0.0


def _bilinear_zeros(x, grid, align=False):
    """Bilinear sampling with zero padding, one output at a time, from the definition."""
    n, c, h, w = x.shape
    out = np.zeros((n, c) + grid.shape[1:3])
    for b, i, j in itertools.product(range(n), range(grid.shape[1]), range(grid.shape[2])):
        gx, gy = grid[b, i, j]
        px = (gx + 1) / 2 * (w - 1) if align else ((gx + 1) * w - 1) / 2
        py = (gy + 1) / 2 * (h - 1) if align else ((gy + 1) * h - 1) / 2
        x0, y0 = int(np.floor(px)), int(np.floor(py))
        for ch in range(c):
            total = 0.0
            for dy, dx in itertools.product((0, 1), (0, 1)):
                weight = (1 - abs(px - (x0 + dx))) * (1 - abs(py - (y0 + dy)))
                total += weight * _pixel(x[b, ch], y0 + dy, x0 + dx, "zeros")
            out[b, ch, i, j] = total
    return out


EXAMPLES = {
    # 4 taps: 2·4 − 1 = 7 FLOPs per output element of (1, 2, 2, 3)
    "grid_sample": Example(lambda x, g: grid_sample(x, g), [X, GRID], _bilinear_zeros, grad=False, flops=7 * 12),
}


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example(name):
    run_example(name, EXAMPLES[name])


def test_align_corners_puts_minus_one_on_the_first_pixel():
    check_op(lambda x, g: grid_sample(x, g, align_corners=True), [X, GRID],
             lambda x, g: _bilinear_zeros(x, g, align=True), grad=False)
    corner = grid_sample(rt.tensor(X), rt.tensor(np.full((1, 1, 1, 2), -1.0)), align_corners=True)
    assert corner.numpy()[0, :, 0, 0].tolist() == pytest.approx(X[0, :, 0, 0].tolist())


@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [False, True])
def test_against_pytorch(mode, padding, align):
    torch = pytest.importorskip("torch")
    if (mode, padding) == ("bicubic", "border"):
        pytest.skip("ONNX clamps a bicubic coordinate to the border before taking its taps, PyTorch only "
                    "the taps; the op follows ONNX (tests/runtime/onnx checks it against onnxruntime)")
    ours = grid_sample(rt.tensor(X.astype(np.float32)), rt.tensor(GRID.astype(np.float32)), mode, padding, align)
    theirs = torch.nn.functional.grid_sample(torch.tensor(X, dtype=torch.float32), torch.tensor(GRID, dtype=torch.float32),
                                             mode=mode, padding_mode=padding, align_corners=align)
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-5, atol=1e-5)


def test_volumetric_against_pytorch():
    torch = pytest.importorskip("torch")
    x, grid = randn(1, 2, 3, 4, 5).astype(np.float32), (randn(1, 2, 3, 2, 3, seed=4) * 0.9).astype(np.float32)
    for mode in ("bilinear", "nearest"):
        ours = grid_sample(rt.tensor(x), rt.tensor(grid), mode, "border", False)
        theirs = torch.nn.functional.grid_sample(torch.tensor(x), torch.tensor(grid), mode=mode, padding_mode="border",
                                                 align_corners=False)
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-5, atol=1e-5)
