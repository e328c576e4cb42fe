"""numba's ``njit`` as every kernel here uses it (imported only by the kernel modules)."""

from __future__ import annotations

import numba

# numpy's float semantics (x/0 is inf or NaN, no ZeroDivisionError check per division): the
# check is a branch per element that keeps loops from being vectorized
_OPTIONS = dict(nogil=True, error_model="numpy")


def jit(function, **options):
    """Compiled with numba's nopython mode, the GIL released, cached on disk where numba finds
    a writable cache directory (next to this file, else the user's cache) and not cached
    where it finds none, rather than failing."""
    try:
        return numba.njit(cache=True, **_OPTIONS, **options)(function)
    except RuntimeError:  # "cannot cache function ...: no locator available"
        return numba.njit(cache=False, **_OPTIONS, **options)(function)


def jit_fma(function):
    """``jit``, with a multiply and the add after it allowed to become one fused multiply-add
    (rounded once): for kernels held to a few units in the last place rather than to the
    bits of a numpy kernel, whose polynomials then take half the instructions."""
    return jit(function, fastmath={"contract"})


def inline(function):
    """A helper of per-element code, inlined into its callers by numba: as a call, it stays a
    call per element and the loop around it is not vectorized."""
    return numba.njit(inline="always", **_OPTIONS)(function)
