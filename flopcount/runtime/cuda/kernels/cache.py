"""Compiled CUDA kernels, built once per (name, dtype, variant) and kept for the process.

CuPy compiles lazily: creating a ``RawKernel``, ``RawModule`` or ``ElementwiseKernel`` costs
nothing, and NVRTC runs (its result cached on disk by CuPy) on the first launch for a device
and argument types. ``kernel()`` makes that explicit: it builds a kernel object once for its
key, and for raw kernels calls ``compile()`` at once, so a source error names the kernel and
compilation never hides inside a timed launch. ElementwiseKernels compile for their argument
types on first call. Either way the first call of an op on a new dtype pays for compilation;
latency measurements run warm-up calls first (``flopcount.eager_hooks.timing``,
``flopcount.graph_parser.execution``).
"""

from __future__ import annotations

from typing import Callable

from . import paths

_CACHE: dict = {}


def kernel(name: str, dtype, build: Callable, variant=()):
    """The kernel cached under ``(name, dtype, variant)``, built by ``build()`` on first use
    (each launch fetches its kernel here, so this notes that the op ran a kernel of our own)."""
    paths.ran(paths.OWN)
    key = (name, str(dtype), variant)
    k = _CACHE.get(key)
    if k is None:
        k = build()
        compile_now = getattr(k, "compile", None)
        if compile_now is not None:  # RawKernel: compile now, not inside the first launch
            compile_now()
        _CACHE[key] = k
    return k


def raw_kernel(name: str, dtype, source: Callable):
    """The ``cupy.RawKernel`` of ``extern "C"`` function ``name``, compiled once per dtype from
    ``source(name, dtype)``."""
    import cupy

    return kernel(name, dtype, lambda: cupy.RawKernel(source(name, dtype), name))


def cached() -> list:
    """Keys of the kernels built so far (for tests and diagnostics)."""
    return list(_CACHE)


def clear() -> None:
    """Forget every built kernel (CuPy's on-disk cache still holds the compiled binaries)."""
    _CACHE.clear()
