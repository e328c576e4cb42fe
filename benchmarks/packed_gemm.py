"""flopcount's GEMM on once-packed weights against numpy's BLAS (OpenBLAS) on the same products,
one thread each.

    python benchmarks/packed_gemm.py [--repeat 9] [--shapes 8x768x3072,128x768x768,...]

Each shape M x K x N multiplies one activation (M, K) by twelve different read-only weights
(K, N) in turn, so that the weights come from memory as in a model rather than from cache: the
packed path (``flopcount.runtime.ops._packed_gemm``, its packs made before timing, as a loaded
model's are after its first run) against ``numpy.matmul``. Both are timed interleaved and the
ratio is the median of the paired ratios (packed / BLAS). There is no target: the table shows
where the packed path pays, which is what sets its ``MIN_ROWS`` and ``MAX_ROWS``.
"""

from __future__ import annotations

import argparse
import os

os.environ["BENCH_THREADS"] = "1"
import cpu_common  # noqa: E402,F401  (sets the BLAS threads before numpy loads)
from cpu_common import Row, interleaved, median_ms, paired_ratio, report  # noqa: E402

import numpy as np  # noqa: E402

SHAPES = ("1x768x3072", "2x768x3072", "8x768x3072", "16x768x768", "49x768x3072", "49x4608x512",
          "128x768x768", "128x768x3072", "128x3072x768", "196x384x1536", "256x768x3072",
          "512x768x3072")
WEIGHTS = 12


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--shapes", default=",".join(SHAPES))
    args = parser.parse_args()

    from flopcount.runtime.ops import _packed_gemm

    rows = []
    rng = np.random.default_rng(0)
    for shape in args.shapes.split(","):
        m, k, n = (int(v) for v in shape.split("x"))
        weights = [rng.standard_normal((k, n)).astype(np.float32) for _ in range(WEIGHTS)]
        for w in weights:
            w.flags.writeable = False  # as a loaded model's
        a = rng.standard_normal((m, k)).astype(np.float32)
        limits = (_packed_gemm.MIN_ROWS, _packed_gemm.MAX_ROWS)
        _packed_gemm.MIN_ROWS, _packed_gemm.MAX_ROWS = 1, 1 << 30  # every shape, to show the limits
        try:
            if _packed_gemm.matmul(np, a, weights[0]) is None:
                print(f"{shape}: the packed path does not take it (K < {_packed_gemm.MIN_DEPTH} or "
                      f"N < {_packed_gemm.MIN_COLUMNS}, or no compiled kernel)")
                continue
            ours, theirs = interleaved(lambda: [_packed_gemm.matmul(np, a, w) for w in weights],
                                       lambda: [np.matmul(a, w) for w in weights], args.repeat)
        finally:
            _packed_gemm.MIN_ROWS, _packed_gemm.MAX_ROWS = limits
        used = limits[0] <= m <= limits[1]
        rows.append(Row(shape, median_ms(ours) / WEIGHTS, median_ms(theirs) / WEIGHTS,
                        paired=paired_ratio(ours, theirs), note="" if used else "not used at this M"))
    report("GEMM on once-packed weights vs numpy's BLAS (1 thread; per product)", "numpy", "BLAS", rows)


if __name__ == "__main__":
    main()
