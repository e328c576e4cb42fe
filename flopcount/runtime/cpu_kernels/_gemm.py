"""float32 GEMM against a weight packed once: C = A·B, B (K, N) a constant of the model.

BLAS packs B into cache-sized panels on every call, reading the weight and writing the copy
before it multiplies; onnxruntime packs a constant weight once, when the session is made, and
its GEMMs on transformer shapes (128 rows, 768 deep) ran faster than OpenBLAS's here
(benchmarks/RESULTS.md, "Figures behind design choices in the code").
This is the same scheme: ``pack_weight`` lays B out once as panels of ``panel_width()`` columns,
(panels, K, width), zero-padded at the right edge, and ``gemm`` multiplies any A by it.

The inner kernel (``_tile_of``) keeps a block of 6 or 7 rows by two vectors of C in registers
while it runs down K: per step two vector loads of the panel, a broadcast of A per row and two
fused multiply-adds per row. It is written in LLVM IR (``_simd``); vectors are 16 floats with
AVX-512 (32 vector registers: 14 accumulators fit) and 8 with AVX2 and FMA (16 registers: 6
rows only). ``tile_rows`` picks the block height for M.

Blocking: A is packed per ``_KC``-deep slice and ``_MC`` rows, (row blocks, depth, rows), so the
kernel reads it sequentially from L2 while a panel slice (``_KC`` x width) stays in cache for
all the row blocks; the first row block of each panel also prefetches the next panel's slice.
Each element of C is summed in float32, one rounding per multiply-add, in order within each
``_KC``-deep slice; each slice's sum is then added to C, as BLAS kernels do: within a few units
in the last place of BLAS's result, not its bits.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from ._jit import jit
from ._simd import LANES, VECTOR, available, counted_loop, data, fma, load_vector, prefetch_line, splat

__all__ = ["LANES", "available", "gemm", "pack_weight", "panel_width", "tile_rows"]

# rows of C per kernel call: 6, or 7 where AVX-512's 32 registers hold the 14 sums (AVX2's 16
# registers do not) and M pads to fewer rows (``tile_rows``)
MAX_ROWS = 7 if LANES == 16 else 6
_KC = 256  # depth of a packed slice of A and B
_MC = 252  # rows of A packed at a time (a multiple of 6 and of 7)


VECTORS = 2  # vectors per row of the C block


def panel_width() -> int:
    return LANES * VECTORS


def _tile_of(rows: int, prefetch: bool = False):
    """The kernel for blocks of ``rows`` rows of C; with ``prefetch``, it also asks for the
    panel ``ahead`` floats further on, row for row, into the caches (``tile``'s docstring)."""

    @intrinsic
    def tile(typingctx, a, a_offset, b, b_offset, depth, c, c_offset, ldc, accumulate, ahead):
        """C[0:rows, 0:width] (+)= A_block · B_panel: ``a`` from ``a_offset`` is (depth, rows) packed
        rows, ``b`` from ``b_offset`` (depth, width), ``c`` from ``c_offset`` rows ``ldc`` apart;
        the product is added to C's old values where ``accumulate`` is nonzero. ``depth`` >= 1.
        With ``prefetch``, each step of K also asks for B's row ``ahead`` floats further on."""
        signature = types.void(a, a_offset, b, b_offset, depth, c, c_offset, ldc, accumulate, ahead)

        def codegen(context, builder, sig, args):
            a_, a_off, b_, b_off, depth_, c_, c_off, ldc_, accumulate_, ahead_ = args
            i64 = ir.IntType(64)
            vector = VECTOR
            width = LANES * VECTORS
            a_ptr = data(context, builder, sig.args[0], a_, a_off)
            b_ptr = data(context, builder, sig.args[2], b_, b_off)
            c_ptr = data(context, builder, sig.args[5], c_, c_off)

            def c_vector(row, j):
                offset = builder.add(builder.mul(ir.Constant(i64, row), ldc_), ir.Constant(i64, j * LANES))
                return builder.bitcast(builder.gep(c_ptr, [offset]), vector.as_pointer())

            def step(k, flat_sums):
                b_row = builder.gep(b_ptr, [builder.mul(k, ir.Constant(i64, width))])
                if prefetch:
                    for line in range(width * 4 // 64):
                        prefetch_line(builder, builder.gep(b_row, [builder.add(ahead_, ir.Constant(i64, line * 16))]))
                b_vectors = [load_vector(builder, builder.gep(b_row, [ir.Constant(i64, j * LANES)]))
                             for j in range(VECTORS)]
                a_row = builder.gep(a_ptr, [builder.mul(k, ir.Constant(i64, rows))])
                new = []
                for r in range(rows):
                    broadcast = splat(builder, builder.load(builder.gep(a_row, [ir.Constant(i64, r)]), align=4))
                    new += [fma(builder, broadcast, b_vectors[j], flat_sums[r * VECTORS + j]) for j in range(VECTORS)]
                return new

            flat = counted_loop(builder, depth_, [ir.Constant(vector, None)] * (rows * VECTORS), step)
            new = [flat[r * VECTORS:(r + 1) * VECTORS] for r in range(rows)]

            # the slice's sum, then C's old value added to it where ``accumulate`` (as BLAS kernels
            # do): a blocked sum, whose rounding error grows with the slice depth plus the number of
            # slices rather than with K. C is read either way (it is allocated memory; a select
            # drops the value) to keep the block free of branches.
            add = builder.icmp_signed("!=", accumulate_, ir.Constant(accumulate_.type, 0))
            for r in range(rows):
                for j in range(VECTORS):
                    pointer = c_vector(r, j)
                    total = builder.fadd(builder.load(pointer, align=4), new[r][j])
                    builder.store(builder.select(add, total, new[r][j]), pointer, align=4)
            return context.get_dummy_value()

        return signature, codegen

    return tile


@jit
def pack_weight(b, out):
    """out[p, k, c] = b[k, p·width + c], zero past B's last column; out is (panels, K, width)."""
    k_size, n = b.shape
    panels, _, width = out.shape
    for p in range(panels):
        columns = min(width, n - p * width)
        for k in range(k_size):
            for c in range(columns):
                out[p, k, c] = b[k, p * width + c]
            for c in range(columns, width):
                out[p, k, c] = 0.0


@jit
def tile_rows(m):
    """Rows of C per block for an M-row product: 7 where the CPU has them (``MAX_ROWS``) and
    7-row blocks pad M to no more rows than 6-row blocks do, else 6. Measured against 6-row
    blocks in one process, 7-row ones win where they pad less (a 7x7 map: 49 rows against 54),
    are even where both pad alike, and lose where they pad more (3 and 8 rows padded to 7 and
    14); the figures are in benchmarks/RESULTS.md."""
    six = (m + 5) // 6 * 6
    seven = (m + 6) // 7 * 7
    return 7 if MAX_ROWS == 7 and seven <= six else 6


def _gemm_of(tile: int):
    """``gemm`` for blocks of ``tile`` rows (a constant of the compiled loops: the kernel and the
    packing are unrolled for it)."""
    kernel = _tile_of(tile)
    # the first block of rows of a panel brings the panel in from memory (a weight is read once
    # per call): it also asks for the next panel's rows, which the other blocks then find cached
    first_kernel = _tile_of(tile, prefetch=True)

    @jit
    def pack_rows(a, m0, rows, k0, depth, out):
        """out[rb, k, r] = a[m0 + rb·tile + r, k0 + k], zero past row m0 + rows."""
        for rb in range((rows + tile - 1) // tile):
            for k in range(depth):
                for r in range(tile):
                    i = rb * tile + r
                    out[rb, k, r] = a[m0 + i, k0 + k] if i < rows else 0.0

    @jit
    def run(a, packed, n, out, first_panel, end_panel):
        m, k_size = a.shape
        width = packed.shape[2]
        ldc = n
        flat = out.reshape(-1)
        b_flat = packed.reshape(-1)
        a_packed = np.empty((_MC // tile, _KC, tile), np.float32)
        block = np.empty((tile, width), np.float32)
        block_flat = block.reshape(-1)
        for k0 in range(0, k_size, _KC):
            depth = min(_KC, k_size - k0)
            accumulate = 1 if k0 > 0 else 0
            for m0 in range(0, m, _MC):
                rows = min(_MC, m - m0)
                pack_rows(a, m0, rows, k0, depth, a_packed)
                a_flat = a_packed.reshape(-1)
                ahead = k_size * width  # from a panel's rows to the same rows of the next panel
                for p in range(first_panel, end_panel):
                    columns = min(width, n - p * width)
                    b_offset = (p * k_size + k0) * width
                    for rb in range((rows + tile - 1) // tile):
                        row0 = m0 + rb * tile
                        a_offset = rb * _KC * tile
                        if row0 + tile <= m and columns == width and rb == 0:
                            first_kernel(a_flat, a_offset, b_flat, b_offset, depth, flat,
                                         row0 * ldc + p * width, ldc, accumulate, ahead)
                        elif row0 + tile <= m and columns == width:
                            kernel(a_flat, a_offset, b_flat, b_offset, depth, flat,
                                   row0 * ldc + p * width, ldc, accumulate, ahead)
                        else:  # an edge block: through a full-size scratch block
                            valid = min(tile, m - row0)
                            if accumulate:
                                for r in range(valid):
                                    for c in range(columns):
                                        block[r, c] = out[row0 + r, p * width + c]
                            if rb == 0:
                                first_kernel(a_flat, a_offset, b_flat, b_offset, depth, block_flat,
                                             0, width, accumulate, ahead)
                            else:
                                kernel(a_flat, a_offset, b_flat, b_offset, depth, block_flat,
                                       0, width, accumulate, ahead)
                            for r in range(valid):
                                for c in range(columns):
                                    out[row0 + r, p * width + c] = block[r, c]

    return run


_gemm6, _gemm7 = _gemm_of(6), _gemm_of(7)


@jit
def gemm(a, packed, n, out, first_panel, end_panel):
    """out[:, columns of panels first_panel:end_panel] = a @ B for B packed by ``pack_weight``
    (n columns); a (M, K) float32 in any strides, out (M, n) float32 in C order."""
    if tile_rows(a.shape[0]) == 7:
        _gemm7(a, packed, n, out, first_panel, end_panel)
    else:
        _gemm6(a, packed, n, out, first_panel, end_panel)
