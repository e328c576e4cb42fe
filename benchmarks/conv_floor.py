"""ResNet-18's convolutions at batch 8: each kernel of a training step (forward, weight gradient,
input gradient) against one BLAS GEMM of the same size, the floor those kernels can reach.

The GEMM column is ``(Cout, Cin·K) @ (Cin·K, N·P)`` on ready columns: what is left of a kernel's
time above it is the column copies (im2col, col2im, the wide grid) and the GEMMs' own layout.
The last row sums a training step: every kernel times its count in the network (the stem has no
input gradient). Run from a checkout::

    python benchmarks/conv_floor.py
"""

from __future__ import annotations

import argparse

import cpu_common  # noqa: F401  (sets the BLAS threads before numpy loads)
from cpu_common import Row, interleaved, median_ms, report

# (in channels, out channels, input size, kernel, stride, padding, how many in resnet18)
LAYERS = [(3, 64, 224, 7, 2, 3, 1), (64, 64, 56, 3, 1, 1, 4), (64, 128, 56, 3, 2, 1, 1),
          (128, 128, 28, 3, 1, 1, 3), (64, 128, 56, 1, 2, 0, 1), (128, 256, 28, 3, 2, 1, 1),
          (256, 256, 14, 3, 1, 1, 3), (128, 256, 28, 1, 2, 0, 1), (256, 512, 14, 3, 2, 1, 1),
          (512, 512, 7, 3, 1, 1, 3), (256, 512, 14, 1, 2, 0, 1)]
BATCH = 8


def layer_rows(layer, repeat: int, rng) -> list:
    import numpy as np

    from flopcount.runtime.ops import _conv_kernels as kernels

    cin, cout, size, k, s, p, _ = layer
    out = (size + 2 * p - k) // s + 1
    x = rng.standard_normal((BATCH, cin, size, size)).astype(np.float32)
    w = rng.standard_normal((cout, cin, k, k)).astype(np.float32)
    g = rng.standard_normal((BATCH, cout, out, out)).astype(np.float32)
    a = rng.standard_normal((cout, cin * k * k)).astype(np.float32)
    cols = rng.standard_normal((cin * k * k, BATCH * out * out)).astype(np.float32)
    output_padding = (size + 2 * p - k) % s
    geometry = ((s, s), (p, p), (1, 1))
    cases = {
        "forward": lambda: kernels.conv_forward(np, x, w, None, *geometry, 1),
        "weight gradient": lambda: kernels.conv_weight_grad(np, x, g, (k, k), *geometry, 1),
    }
    if cin != 3:  # the stem's input needs no gradient
        cases["input gradient"] = lambda: kernels.conv_transpose_forward(
            np, g, w, None, (s, s), (p, p), (output_padding,) * 2, (1, 1), 1)
    rows = []
    for name, kernel in cases.items():
        ours, floor = interleaved(kernel, lambda: a @ cols, repeat)
        rows.append(Row(f"{cin}->{cout}, {size}x{size}, {k}x{k} stride {s}: {name}",
                        median_ms(ours), median_ms(floor)))
    return rows


def main() -> None:
    import numpy as np

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=9, help="timed calls per side")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    rows, ours_total, floor_total = [], 0.0, 0.0
    for layer in LAYERS:
        for row in layer_rows(layer, args.repeat, rng):
            rows.append(row)
            ours_total += layer[-1] * row.ours
            floor_total += layer[-1] * row.peer
    rows.append(Row("resnet18 training step: all convolution kernels, each times its count",
                    ours_total, floor_total))
    report("ResNet-18 convolution kernels vs one GEMM of the same size", "numpy matmul",
           "one GEMM", rows, extra=f"batch {BATCH}; medians of {args.repeat} interleaved calls per side")


if __name__ == "__main__":
    main()
