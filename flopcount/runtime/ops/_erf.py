"""The error function on any array module (numpy has none; CuPy's lives in cupyx).

Float64: W. J. Cody's rational Chebyshev approximations ("Rational Chebyshev approximations for
the error function", Math. Comp. 23, 1969), about 1e-16 relative error.

Float32 and float16: one rational function x·P(x²)/Q(x²) on x clamped to [-4, 4] (erfc(4) < 2e-8
is below float32 resolution next to 1), the coefficients Eigen and XLA use for float erf; the
approximation is within 7e-8 of erf. It is evaluated in float64, because in float32 the
alternating terms at |x| near 3 cancel to a 4e-7 error. The evaluation runs over blocks of
``BLOCK`` elements with every step written in place into a few block-sized buffers that stay in
cache: about 25 passes over data in cache instead of as many full-size temporaries (several
times faster than the Cody form for a ViT MLP activation; benchmarks/RESULTS.md, "Figures behind
design choices in the code"). ``gelu_erf`` runs GELU's own arithmetic in the
same blocks. Where numba is there, float32 runs the same arithmetic in one compiled loop
(``cpu_kernels``, with fused multiply-adds in its float64 evaluation: within one unit in the
last place of this kernel's result, and nearly always its bits).
"""

from __future__ import annotations

import numpy as np

from .. import cpu_kernels
from ._scratch import scratch

_A = (3.16112374387056560e00, 1.13864154151050156e02, 3.77485237685302021e02,
      3.20937758913846947e03, 1.85777706184603153e-1)
_B = (2.36012909523441209e01, 2.44024637934444173e02, 1.28261652607737228e03,
      2.84423683343917062e03)
_C = (5.64188496988670089e-1, 8.88314979438837594e00, 6.61191906371416295e01,
      2.98635138197400131e02, 8.81952221241769090e02, 1.71204761263407058e03,
      2.05107837782607147e03, 1.23033935479799725e03, 2.15311535474403846e-8)
_D = (1.57449261107098347e01, 1.17693950891312499e02, 5.37181101862009858e02,
      1.62138957456669019e03, 3.29079923573345963e03, 4.36261909014324716e03,
      3.43936767414372164e03, 1.23033935480374942e03)
_P = (3.05326634961232344e-1, 3.60344899949804439e-1, 1.25781726111229246e-1,
      1.60837851487422766e-2, 6.58749161529837803e-4, 1.63153871373020978e-2)
_Q = (2.56852019228982242e00, 1.87295284992346047e00, 5.27905102951428412e-1,
      6.05183413124413191e-2, 2.33520497626869185e-3)
_ONE_OVER_SQRT_PI = 5.6418958354775628695e-1


def _cody_terms(num, den, t) -> tuple:
    """Numerator and denominator of Cody's rational form in ``t``, with n = len(den):
    ((num[n]·t + num[0])·t + ... + num[n-2])·t + num[n-1] and ((t + den[0])·t + ... + den[n-2])·t + den[n-1]."""
    n = len(den)
    top = num[n] * t
    bottom = t
    for i in range(n - 1):
        top = (top + num[i]) * t
        bottom = (bottom + den[i]) * t
    return top + num[n - 1], bottom + den[n - 1]


def _erf_small(y2):
    """erf(y)/y for |y| <= 0.46875, as a rational function of y^2."""
    top, bottom = _cody_terms(_A, _B, y2)
    return top / bottom


def _erfc_scaled_mid(y):
    """erfc(y) * exp(y^2) for 0.46875 < y <= 4."""
    top, bottom = _cody_terms(_C, _D, y)
    return top / bottom


def _erfc_scaled_tail(y):
    """erfc(y) * exp(y^2) for y > 4 (asymptotic form)."""
    z = 1.0 / (y * y)
    top, bottom = _cody_terms(_P, _Q, z)
    r = z * top / bottom
    return (_ONE_OVER_SQRT_PI - r) / y


def _erf_cody(xp, x):
    y = xp.abs(x)
    small = x * _erf_small(y * y)
    y_mid = xp.minimum(xp.maximum(y, 0.46875), 4.0)
    y_tail = xp.maximum(y, 4.0)
    scaled = xp.where(y <= 4.0, _erfc_scaled_mid(y_mid), _erfc_scaled_tail(y_tail))
    large = xp.sign(x) * (1.0 - xp.exp(-y * y) * scaled)
    return xp.where(y <= 0.46875, small, large)


# x·P(x²)/Q(x²) for single precision, highest power first
_P_SINGLE = (-2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06, -5.69250639462346e-05,
             -7.34990630326855e-04, -2.95459980854025e-03, -1.60960333262415e-02)
_Q_SINGLE = (-1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03,
             -7.37332916720468e-03, -1.42647390514189e-02)
_SQRT_HALF = 0.7071067811865476

# elements per block: four float64 buffers of this size (1 MB) stay in a core's L2 cache
BLOCK = 32768


def _single_blocks(xp, x, finish, scale: float = 1.0, factor: float = 1.0):
    """Apply ``finish(xp, r, x_block, out_block)`` to r = factor·erf(scale·x) block by block;
    returns the output array (x's dtype). Every step writes into block buffers (``out=``).
    One thread: two would hand the GIL back and forth between the 25 small calls of a block."""
    out = xp.empty(x.shape, dtype=x.dtype)
    flat, flat_out = x.reshape(-1), out.reshape(-1)
    coef_p = [factor * a for a in _P_SINGLE]

    def run(start: int, stop: int) -> None:
        k = stop - start
        cb, x2b, pb, qb = (scratch(xp, role, (k,), np.float64) for role in ("erf_c", "erf_x2", "erf_p", "erf_q"))
        xb = flat[start:stop]
        xp.multiply(xb, scale, out=cb)
        xp.clip(cb, -4.0, 4.0, out=cb)
        xp.multiply(cb, cb, out=x2b)
        xp.multiply(x2b, coef_p[0], out=pb)
        pb += coef_p[1]
        for a in coef_p[2:]:
            pb *= x2b
            pb += a
        pb *= cb
        xp.multiply(x2b, _Q_SINGLE[0], out=qb)
        qb += _Q_SINGLE[1]
        for b in _Q_SINGLE[2:]:
            qb *= x2b
            qb += b
        pb /= qb
        finish(xp, pb, xb, flat_out[start:stop])

    n = flat.size
    step = BLOCK if xp is np else max(n, 1)  # a GPU wants one launch per step, not blocks
    for start in range(0, n, step):
        run(start, min(start + step, n))
    return out


def _store(xp, r, xb, out_block):
    out_block[...] = r


def _gelu_tail(xp, r, xb, out_block):
    # r = erf(x/√2)/2: gelu = x·(1/2 + r)
    r += 0.5
    xp.multiply(r, xb, out=out_block)


def compiled_kernels(xp, x):
    """The compiled elementwise kernels where they run ``x`` (a float32 numpy array), else None."""
    return cpu_kernels.kernel("elementwise", xp) if x.dtype == np.float32 else None


def erf(xp, x):
    """Elementwise erf(x), same dtype as ``x`` (floating)."""
    compiled = compiled_kernels(xp, x)
    if compiled is not None:
        return compiled.unary(compiled.erf_float32, x, _P_SINGLE, _Q_SINGLE)
    if x.dtype == np.float64:
        return _erf_cody(xp, x)
    return _single_blocks(xp, x, _store)


def erf_gelu_chain(xp, x, divisor, offset, factor, factor_first: bool):
    """(x·(erf(x/divisor) + offset))·factor, or x·(factor·(erf(x/divisor) + offset)) where
    ``factor_first``, for float32 ``x`` and float32 scalars, in one compiled pass with the bits of
    the five ops one after the other; None where the compiled kernels do not run."""
    compiled = compiled_kernels(xp, x)
    if compiled is None:
        return None
    return compiled.unary(compiled.erf_gelu_chain_float32, x, np.float32(divisor), np.float32(offset),
                          np.float32(factor), factor_first, _P_SINGLE, _Q_SINGLE)


def gelu_erf(xp, x):
    """GELU's erf form x·Φ(x) = x·(1 + erf(x/√2))/2, same dtype as ``x``; in float64 through
    Cody's erf, in single precision within the blocks of ``erf``."""
    compiled = compiled_kernels(xp, x)
    if compiled is not None:
        return compiled.unary(compiled.gelu_float32, x, np.float32(_SQRT_HALF), _P_SINGLE, _Q_SINGLE)
    if x.dtype == np.float64:
        return 0.5 * x * (1 + _erf_cody(xp, x * _SQRT_HALF))
    return _single_blocks(xp, x, _gelu_tail, scale=_SQRT_HALF, factor=0.5)
