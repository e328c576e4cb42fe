"""The three transforms of Winograd's F(2x2, 3x3) convolution (Lavin and Gray, 2015), compiled.

A 3x3 stride-1 convolution computes each 2x2 block of an output plane from the 4x4 block of
input under it. In the transformed space the 9·4 multiply-adds per input channel and 2x2 output
block become 16 elementwise products, which, summed over input channels, are 16 matrix products
(``ops/_winograd.py`` runs them through BLAS): 2.25x fewer multiplications, at the price of these
transforms, which only add and subtract (and halve, for the weights):

    V = Bᵀ d B   for each 4x4 input block d   (``input_transform``)
    U = G g Gᵀ   for each 3x3 kernel g        (``weight_transform``)
    Y = Aᵀ M A   for each 4x4 block M of sums (``output_transform``)

with Bᵀ = [[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], G = [[1, 0, 0],
[½, ½, ½], [½, -½, ½], [0, 0, 1]] and Aᵀ = [[1, 1, 1, 0], [0, 1, -1, -1]]. Transformed arrays
are (16, rows, columns): entry 4i + j of a block is plane 4i + j. Each kernel computes in the
dtype of its arrays (float32 or float64).
"""

from __future__ import annotations

from ._jit import inline, jit


@inline
def _at(x, b, ch, r, c, h, w, zero, inside):
    # an input element, or the zero padding outside the plane (no bounds to check where the
    # whole block is ``inside``: the compiler then takes the checks out of interior blocks)
    if inside or (r >= 0 and r < h and c >= 0 and c < w):
        return x[b, ch, r, c]
    return zero


@jit
def input_transform(x, ph, pw, tiles_h, tiles_w, v, zero):
    """v[:, ch, t] = Bᵀ d B for the 4x4 block d of channel ``ch`` of the zero-padded input
    (padding ``ph``, ``pw``) whose output block is tile t = (image·tiles_h + row)·tiles_w + col;
    x is (N, C, H, W), v (16, C, N·tiles_h·tiles_w)."""
    n, c, h, w = x.shape
    for b in range(n):
        for ch in range(c):
            for ty in range(tiles_h):
                r = 2 * ty - ph
                for tx in range(tiles_w):
                    s = 2 * tx - pw
                    t = (b * tiles_h + ty) * tiles_w + tx
                    inside = r >= 0 and r + 4 <= h and s >= 0 and s + 4 <= w
                    d00 = _at(x, b, ch, r, s, h, w, zero, inside)
                    d01 = _at(x, b, ch, r, s + 1, h, w, zero, inside)
                    d02 = _at(x, b, ch, r, s + 2, h, w, zero, inside)
                    d03 = _at(x, b, ch, r, s + 3, h, w, zero, inside)
                    d10 = _at(x, b, ch, r + 1, s, h, w, zero, inside)
                    d11 = _at(x, b, ch, r + 1, s + 1, h, w, zero, inside)
                    d12 = _at(x, b, ch, r + 1, s + 2, h, w, zero, inside)
                    d13 = _at(x, b, ch, r + 1, s + 3, h, w, zero, inside)
                    d20 = _at(x, b, ch, r + 2, s, h, w, zero, inside)
                    d21 = _at(x, b, ch, r + 2, s + 1, h, w, zero, inside)
                    d22 = _at(x, b, ch, r + 2, s + 2, h, w, zero, inside)
                    d23 = _at(x, b, ch, r + 2, s + 3, h, w, zero, inside)
                    d30 = _at(x, b, ch, r + 3, s, h, w, zero, inside)
                    d31 = _at(x, b, ch, r + 3, s + 1, h, w, zero, inside)
                    d32 = _at(x, b, ch, r + 3, s + 2, h, w, zero, inside)
                    d33 = _at(x, b, ch, r + 3, s + 3, h, w, zero, inside)
                    # Bᵀ d, row by row
                    e00, e01, e02, e03 = d00 - d20, d01 - d21, d02 - d22, d03 - d23
                    e10, e11, e12, e13 = d10 + d20, d11 + d21, d12 + d22, d13 + d23
                    e20, e21, e22, e23 = d20 - d10, d21 - d11, d22 - d12, d23 - d13
                    e30, e31, e32, e33 = d10 - d30, d11 - d31, d12 - d32, d13 - d33
                    # (Bᵀ d) B, column by column
                    v[0, ch, t] = e00 - e02
                    v[1, ch, t] = e01 + e02
                    v[2, ch, t] = e02 - e01
                    v[3, ch, t] = e01 - e03
                    v[4, ch, t] = e10 - e12
                    v[5, ch, t] = e11 + e12
                    v[6, ch, t] = e12 - e11
                    v[7, ch, t] = e11 - e13
                    v[8, ch, t] = e20 - e22
                    v[9, ch, t] = e21 + e22
                    v[10, ch, t] = e22 - e21
                    v[11, ch, t] = e21 - e23
                    v[12, ch, t] = e30 - e32
                    v[13, ch, t] = e31 + e32
                    v[14, ch, t] = e32 - e31
                    v[15, ch, t] = e31 - e33


@inline
def _kernel_row(u, row, o, i, g0, g1, g2):
    # one row of G g, times Gᵀ
    u[row, o, i] = g0
    u[row + 1, o, i] = 0.5 * (g0 + g1 + g2)
    u[row + 2, o, i] = 0.5 * (g0 - g1 + g2)
    u[row + 3, o, i] = g2


@jit
def weight_transform(w, u):
    """u[:, o, i] = G w[o, i] Gᵀ for w (Cout, C, 3, 3), u (16, Cout, C)."""
    cout, c = w.shape[0], w.shape[1]
    for o in range(cout):
        for i in range(c):
            g = w[o, i]
            _kernel_row(u, 0, o, i, g[0, 0], g[0, 1], g[0, 2])
            _kernel_row(u, 4, o, i, 0.5 * (g[0, 0] + g[1, 0] + g[2, 0]), 0.5 * (g[0, 1] + g[1, 1] + g[2, 1]),
                        0.5 * (g[0, 2] + g[1, 2] + g[2, 2]))
            _kernel_row(u, 8, o, i, 0.5 * (g[0, 0] - g[1, 0] + g[2, 0]), 0.5 * (g[0, 1] - g[1, 1] + g[2, 1]),
                        0.5 * (g[0, 2] - g[1, 2] + g[2, 2]))
            _kernel_row(u, 12, o, i, g[2, 0], g[2, 1], g[2, 2])


@jit
def output_transform(m, bias, has_bias, tiles_h, tiles_w, y):
    """y[b, k, 2·ty : 2·ty + 2, 2·tx : 2·tx + 2] = Aᵀ m[:, k, t] A (+ bias[k]) for each tile
    t = (b·tiles_h + ty)·tiles_w + tx, cropped to y (N, Cout, OH, OW); m is (16, Cout, tiles)."""
    n, cout, oh, ow = y.shape
    for b in range(n):
        for k in range(cout):
            for ty in range(tiles_h):
                r = 2 * ty
                for tx in range(tiles_w):
                    t = (b * tiles_h + ty) * tiles_w + tx
                    s = 2 * tx
                    # Aᵀ m: two rows of four
                    p0 = m[0, k, t] + m[4, k, t] + m[8, k, t]
                    p1 = m[1, k, t] + m[5, k, t] + m[9, k, t]
                    p2 = m[2, k, t] + m[6, k, t] + m[10, k, t]
                    p3 = m[3, k, t] + m[7, k, t] + m[11, k, t]
                    q0 = m[4, k, t] - m[8, k, t] - m[12, k, t]
                    q1 = m[5, k, t] - m[9, k, t] - m[13, k, t]
                    q2 = m[6, k, t] - m[10, k, t] - m[14, k, t]
                    q3 = m[7, k, t] - m[11, k, t] - m[15, k, t]
                    y00, y01 = p0 + p1 + p2, p1 - p2 - p3
                    y10, y11 = q0 + q1 + q2, q1 - q2 - q3
                    if has_bias:
                        y00, y01, y10, y11 = y00 + bias[k], y01 + bias[k], y10 + bias[k], y11 + bias[k]
                    y[b, k, r, s] = y00
                    if s + 1 < ow:
                        y[b, k, r, s + 1] = y01
                    if r + 1 < oh:
                        y[b, k, r + 1, s] = y10
                        if s + 1 < ow:
                            y[b, k, r + 1, s + 1] = y11
