"""Elementwise activations as one compiled pass each, on float32 (the dtype of nearly every
model file; other dtypes keep the numpy kernels): erf and GELU's erf form, sigmoid, SiLU,
hardswish, ReLU.

erf is the numpy kernel's own arithmetic (``ops/_erf.py``: x·P(x²)/Q(x²) in float64 on x
clamped to [-4, 4], its coefficients passed in) in the same order, with each multiply and the add
after it fused (rounded once; less time on ConvNeXt's GELUs). Rounded to float32 at
the end, the result is the numpy kernel's but where the float64 value lies within the float64
rounding of a float32 halfway point: then the two differ by one unit in the last place.
This package imports nothing else of the runtime: the ops import it. numba compiles ``math.exp``
to a call per element that the compiler cannot vectorize (several times slower than numpy's
SIMD exp; benchmarks/RESULTS.md, "Figures behind design choices in the code"), so
sigmoid's float32 exp is written out here: Cody and Waite's range reduction, Cephes' expf
polynomial (within 2 ulp), and 2^n put together from its bits, over blocks that stay in cache.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from ._jit import inline, jit, jit_fma

# elements per block of sigmoid's exp: two float32 and one int32 buffers of 16 KB each in L1
BLOCK = 4096

_F = np.float32
LOG2E = _F(1.44269504088896341)
LN2_HI = _F(0.693359375)  # ln 2 split so that n·LN2_HI is exact for |n| < 2^10
LN2_LO = _F(-2.12194440e-4)
EXP_MIN = _F(-87.0)  # exp(-87) = 1.6e-38: a normal float32 (2^n's exponent fits its bits)
ZERO, HALF, ONE, THREE, SIX = _F(0.0), _F(0.5), _F(1.0), _F(3.0), _F(6.0)
C0, C1, C2, C3, C4, C5 = (_F(1.9875691500e-4), _F(1.3981999507e-3), _F(8.3334519073e-3),
                          _F(4.1665795894e-2), _F(1.6666665459e-1), _F(5.0000001201e-1))


@inline
def _erf_ratio(c, p_coef, q_coef):
    """erf(c) for c already clamped to [-4, 4] (float64), as the numpy kernel evaluates it:
    c·P(c²)/Q(c²) by Horner's rule, coefficients highest power first."""
    x2 = c * c
    p = x2 * p_coef[0] + p_coef[1]
    p = p * x2 + p_coef[2]
    p = p * x2 + p_coef[3]
    p = p * x2 + p_coef[4]
    p = p * x2 + p_coef[5]
    p = p * x2 + p_coef[6]
    p = p * c
    q = x2 * q_coef[0] + q_coef[1]
    q = q * x2 + q_coef[2]
    q = q * x2 + q_coef[3]
    q = q * x2 + q_coef[4]
    return p / q


@inline
def _clamp4(c):
    # comparisons, not min/max: NaN passes through, as numpy's clip lets it
    if c < -4.0:
        return -4.0
    if c > 4.0:
        return 4.0
    return c


@jit_fma
def erf_float32(x, out, p_coef, q_coef):
    """out = erf(x) over flat float32 arrays, with the numpy kernel's coefficients (tuples of
    7 and 5 floats)."""
    for i in range(x.size):
        out[i] = _erf_ratio(_clamp4(np.float64(x[i])), p_coef, q_coef)


@jit_fma
def gelu_float32(x, out, scale, p_coef, q_coef):
    """out = x·(1/2 + erf(x·scale)/2) over flat float32 arrays (``scale`` = 1/√2 as a float32:
    the product x·scale is rounded to float32 first, as numpy computes it)."""
    for i in range(x.size):
        v = x[i]
        r = _erf_ratio(_clamp4(np.float64(v * scale)), p_coef, q_coef) * 0.5
        out[i] = (r + 0.5) * np.float64(v)


@jit_fma
def erf_gelu_chain_float32(x, out, divisor, offset, factor, factor_first, p_coef, q_coef):
    """out = (x·(erf(x/divisor) + offset))·factor, or x·(factor·(erf(x/divisor) + offset)) where
    ``factor_first``, over flat float32 arrays: GELU's erf form as exporters write it (Div, Erf,
    Add, Mul, Mul), each step the float32 operation its op's kernel does, so the bits are those
    of the ops one after the other (erf as ``erf_float32``, which is compiled the same way)."""
    for i in range(x.size):
        v = x[i]
        e = np.float32(_erf_ratio(_clamp4(np.float64(v / divisor)), p_coef, q_coef))
        u = e + offset
        out[i] = v * (factor * u) if factor_first else (v * u) * factor


@inline
def _exp_minus_abs(xb, poly, scale_bits, size):
    """exp(-|x|) of a block as poly[i]·2^n[i] (2^n as float32 bits in ``scale_bits``)."""
    for i in range(size):
        a = -abs(xb[i])
        tiny = a < EXP_MIN  # exp(a) below float32's normal range: taken as 0
        if tiny:
            a = EXP_MIN
        k = np.floor(a * LOG2E + HALF)
        r = a - k * LN2_HI - k * LN2_LO
        p = ((((C0 * r + C1) * r + C2) * r + C3) * r + C4) * r + C5
        poly[i] = ZERO if tiny else p * r * r + r + ONE
        scale_bits[i] = (np.int32(k) + 127) << 23


@jit_fma
def sigmoid_float32(x, out):
    """out = 1/(1 + exp(-x)) over flat float32 arrays, as e/(1 + e) with e = exp(-|x|) where
    x < 0 (no overflow for very negative x)."""
    poly = np.empty(BLOCK, np.float32)
    bits = np.empty(BLOCK, np.int32)
    scale = bits.view(np.float32)
    n = x.size
    for start in range(0, n, BLOCK):
        size = min(BLOCK, n - start)
        xb = x[start:start + size]
        ob = out[start:start + size]
        _exp_minus_abs(xb, poly, bits, size)
        for i in range(size):
            e = poly[i] * scale[i]
            s = ONE / (ONE + e)
            ob[i] = s if xb[i] >= 0 else e * s


@jit_fma
def silu_float32(x, out):
    """out = x·sigmoid(x) over flat float32 arrays in one pass: ``sigmoid_float32``'s value,
    then the product rounded to float32, as multiplying by that sigmoid's array gives.
    ``out`` may be ``x`` (in place): the block's x is copied aside first, as the compiler
    vectorizes a loop only where its output overlaps none of its inputs."""
    poly = np.empty(BLOCK, np.float32)
    bits = np.empty(BLOCK, np.int32)
    scale = bits.view(np.float32)
    saved = np.empty(BLOCK, np.float32)
    n = x.size
    for start in range(0, n, BLOCK):
        size = min(BLOCK, n - start)
        xb = x[start:start + size]
        ob = out[start:start + size]
        for i in range(size):
            saved[i] = xb[i]
        _exp_minus_abs(saved, poly, bits, size)
        for i in range(size):
            e = poly[i] * scale[i]
            s = ONE / (ONE + e)
            v = saved[i]
            ob[i] = v * (s if v >= 0 else e * s)


@partial(jit, fastmath={"reassoc"})
def _all_finite(row):
    """Whether no element is NaN or infinite: Σ x·0 is 0 then, NaN otherwise (NaN and inf
    times 0 are NaN), summed in vector lanes."""
    total = ZERO
    for i in range(row.size):
        total += row[i] * ZERO
    return total == ZERO


@partial(jit, fastmath={"nnan", "ninf", "nsz"})
def _finite_max(row):
    """max(row) of finite values, ordered as the compiler likes (the max of numbers does not
    depend on the order): it then runs in vector lanes."""
    top = row[0]
    for i in range(row.size):
        top = max(top, row[i])
    return top


@jit
def _max_or_nan(row):
    """max(row), NaN where the row has one (numpy's maximum), one element at a time."""
    top = row[0]
    for i in range(row.size):
        v = row[i]
        if v != v:
            return v
        top = v if v > top else top
    return top


@partial(jit, fastmath={"reassoc", "contract"})
def _exp_sum(poly, scale, n):
    """poly[i] = poly[i]·scale[i] (exp as ``_exp_minus_abs`` leaves it) and their float32 sum,
    in vector lanes."""
    total = ZERO
    for i in range(n):
        e = poly[i] * scale[i]
        poly[i] = e
        total += e
    return total


@jit_fma
def softmax_rows_float32(x, out):
    """out[r] = exp(x[r] - max(x[r])) / Σ exp(x[r] - max(x[r])) for each row of 2-d float32
    arrays (C order): the exp as sigmoid's (within 2 ulp; 0 below float32's normal range),
    the sum in float32 vector lanes, one division per element, as numpy's kernel divides. A
    row with a NaN, or whose max is +inf or -inf, is NaN, as in numpy's kernel (inf - inf)."""
    rows, n = x.shape
    poly = np.empty(n, np.float32)
    bits = np.empty(n, np.int32)
    scale = bits.view(np.float32)
    shifted = np.empty(n, np.float32)
    for r in range(rows):
        xr = x[r]
        top = _finite_max(xr) if _all_finite(xr) else _max_or_nan(xr)
        for i in range(n):
            shifted[i] = xr[i] - top  # NaN where top is NaN, or +-inf and x is too
        _exp_minus_abs(shifted, poly, bits, n)  # the shifted values are <= 0: exp(-|s|) = exp(s)
        total = _exp_sum(poly, scale, n)
        orow = out[r]
        for i in range(n):
            orow[i] = poly[i] / total


@inline
def _hardswish(v):
    """v·clip(v + 3, 0, 6)/6 in numpy's order of operations."""
    c = v + THREE
    if c < ZERO:
        c = ZERO
    elif c > SIX:
        c = SIX
    return v * c / SIX


@inline
def _relu(v):
    """maximum(v, 0) as numpy's gives it: +0 for -0, NaN kept with its sign."""
    return v if v > ZERO or v != v else ZERO


@jit
def hardswish_float32(x, out):
    """out = x·clip(x + 3, 0, 6)/6 over flat float32 arrays, in numpy's order of operations."""
    for i in range(x.size):
        out[i] = _hardswish(x[i])


@jit
def relu_float32(x, out):
    """out = maximum(x, 0) over flat float32 arrays, as numpy's gives it. numpy's maximum
    against a scalar runs without SIMD (well below memory speed)."""
    for i in range(x.size):
        out[i] = _relu(x[i])


# activations a convolution's output can take in place, with its bias, in one pass
NO_ACTIVATION, RELU, HARDSWISH, SILU = 0, 1, 2, 3


@jit
def bias_activation_float32(y, bias, activation):
    """In place over y (N, C, P) float32: y[n, c] = activation(y[n, c] + bias[c]) (no bias
    when ``bias`` is empty), each step the float32 operation the separate kernels do, so the
    bits are those of adding the bias and then running the activation's kernel."""
    n_images, channels, size = y.shape
    with_bias = bias.size > 0
    for n in range(n_images):
        for c in range(channels):
            row = y[n, c]
            b = bias[c] if with_bias else ZERO
            if activation == RELU:
                if with_bias:
                    for q in range(size):
                        row[q] = _relu(row[q] + b)
                else:
                    for q in range(size):
                        row[q] = _relu(row[q])
            elif activation == HARDSWISH:
                for q in range(size):
                    row[q] = _hardswish(row[q] + b if with_bias else row[q])
            elif with_bias:
                for q in range(size):
                    row[q] += b
    if activation == SILU:
        flat = y.reshape(-1)
        silu_float32(flat, flat)  # element i is read before it is written


@jit
def bias_residual_float32(y, bias, other, relu):
    """In place over y (N, C, P) float32: y[n, c] = (y[n, c] + bias[c]) + other[n, c] (no bias
    when ``bias`` is empty), then ReLU when ``relu``: the bits of adding the bias, adding the
    residual ``other`` (N, C, P) and running ReLU's kernel, one after the other."""
    n_images, channels, size = y.shape
    with_bias = bias.size > 0
    for n in range(n_images):
        for c in range(channels):
            row = y[n, c]
            residual = other[n, c]
            b = bias[c] if with_bias else ZERO
            if with_bias and relu:
                for q in range(size):
                    row[q] = _relu((row[q] + b) + residual[q])
            elif with_bias:
                for q in range(size):
                    row[q] = (row[q] + b) + residual[q]
            elif relu:
                for q in range(size):
                    row[q] = _relu(row[q] + residual[q])
            else:
                for q in range(size):
                    row[q] += residual[q]


def unary(kernel, x, *args):
    """A new array: ``kernel(x_flat, out_flat, *args)`` over ``x`` (float32, any layout)."""
    out = np.empty(x.shape, dtype=np.float32)
    kernel(np.ascontiguousarray(x).reshape(-1), out.reshape(-1), *args)
    return out
