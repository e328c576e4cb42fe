"""numba's ``njit`` as every kernel here uses it (imported only by the kernel modules), and the
key its disk cache is checked against."""

from __future__ import annotations

import os

import numba
from numba.core import caching

# Raise to drop every kernel compiled by an earlier flopcount (the cache is also dropped when
# any file of this folder changes; this covers what no file here shows, e.g. a new numba flag).
KERNEL_SALT = 1
_HERE = os.path.dirname(os.path.abspath(__file__))


def folder_stamp() -> tuple:
    """The salt and every module of this folder's modification time and size. numba checks a
    cached kernel only against its own file, but the kernels are built from IR pieces and inline
    helpers in other files here (``_simd.py``), whose edits must recompile them too."""
    files = sorted(f for f in os.listdir(_HERE) if f.endswith(".py"))
    stats = [(f, os.stat(os.path.join(_HERE, f))) for f in files]
    return (KERNEL_SALT,) + tuple((f, st.st_mtime_ns, st.st_size) for f, st in stats)


class _FolderStampedLocator(caching._CacheLocator):
    """Where numba's own locators would cache a kernel of this folder, checked against
    ``folder_stamp()`` besides the kernel's file."""

    def __init__(self, inner):
        self._inner = inner

    @classmethod
    def from_function(cls, py_func, py_file):
        if os.path.dirname(os.path.abspath(py_file)) != _HERE:
            return None
        for locator in caching.CacheImpl._locator_classes:
            if locator is not cls:
                inner = locator.from_function(py_func, py_file)
                if inner is not None:
                    return cls(inner)
        return None

    def ensure_cache_path(self):
        self._inner.ensure_cache_path()

    def get_cache_path(self):
        return self._inner.get_cache_path()

    def get_source_stamp(self):
        return (self._inner.get_source_stamp(), folder_stamp())

    def get_disambiguator(self):
        return self._inner.get_disambiguator()


if _FolderStampedLocator not in caching.CacheImpl._locator_classes:
    # first, so that it answers for this folder's kernels; it answers None for anyone else's
    caching.CacheImpl._locator_classes.insert(0, _FolderStampedLocator)

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
