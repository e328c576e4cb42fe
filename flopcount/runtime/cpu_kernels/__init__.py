"""Compiled CPU kernels (numba) for the ops numpy cannot run in one pass.

numpy runs one operation per pass over memory: a depthwise convolution is two passes per kernel
position, erf about 25 (its rational function step by step). A compiled loop does each in one
pass, as onnxruntime's and PyTorch's kernels do. The numpy kernels stay the reference and the
fallback: each op asks ``kernel(name)`` and runs its numpy code when it gets None, which it
does when numba cannot be imported, when ``FLOPCOUNT_NUMBA=0`` was set as flopcount was imported
(or ``numpy_only()`` is active), and for arrays that are not numpy's (CuPy runs its own kernels).

numba is imported, and a kernel compiled, on the first call that needs it, never by
``import flopcount``: counting a model pays nothing for it. Compiled code is cached on disk
(``__pycache__`` next to these files, else numba's user cache directory, else not at all), so a
later process loads it instead of compiling again. The first timed run after installing
compiles what the model needs (seconds per model; benchmarks/RESULTS.md, "Figures behind design
choices in the code"): ``compilations()`` counts the
kernels compiled in this process, so that a timed run in which one compiled is run again
(``recording/timing.py``), and ``on_compile(callback)`` names each one as it starts, for a
status line.

    >>> from flopcount.runtime import cpu_kernels
    >>> with cpu_kernels.numpy_only():
    ...     cpu_kernels.kernel("depthwise") is None
    True
"""

from __future__ import annotations

import importlib
import os
import threading
import warnings
from contextlib import contextmanager

import numpy as np

ENV = "FLOPCOUNT_NUMBA"
# read once, when flopcount is imported: ``kernel()`` runs for every op call, and reading the
# environment there cost more than a small op's own work
_TURNED_OFF = os.environ.get(ENV, "").strip().lower() in ("0", "false", "no", "off")
# kernel name -> module of this package that defines it
_MODULES = {"depthwise": "_depthwise", "elementwise": "_elementwise", "gemm": "_gemm", "narrow_conv": "_narrow_conv",
            "norm": "_norm", "pooling": "_pooling", "winograd": "_winograd"}

_loaded: dict = {}
_lock = threading.Lock()
_local = threading.local()
_compiled = [0]          # kernels compiled (not loaded from the disk cache) in this process
_watchers: list = []     # on_compile callbacks


def enabled() -> bool:
    """Whether compiled kernels may run: not turned off by ``FLOPCOUNT_NUMBA=0`` (when the
    process started) or ``numpy_only()``, and numba importable."""
    if _TURNED_OFF or getattr(_local, "numpy_only", False):
        return False
    return _numba_available()


def _numba_available() -> bool:
    if "numba" not in _loaded:
        try:
            import numba  # noqa: F401
        except Exception:  # not installed, or built for another numpy: the numpy kernels run
            _loaded["numba"] = False
        else:
            _loaded["numba"] = True
            _watch_compilations()
    return _loaded["numba"]


def _watch_compilations() -> None:
    # numba fires "numba:compile" around each compilation it cannot load from its disk cache
    from numba.core import event

    class _Counter(event.Listener):
        def on_start(self, ev):
            _compiled[0] += 1
            dispatcher = ev.data.get("dispatcher")
            name = getattr(getattr(dispatcher, "py_func", None), "__qualname__", "kernel")
            for callback in list(_watchers):
                callback(name)

        def on_end(self, ev):
            pass

    event.register("numba:compile", _Counter())


def compilations() -> int:
    """How many kernels this process has compiled so far (loads from the disk cache are not
    compilations): a timed run during which this changed timed a compiler, not the model."""
    return _compiled[0]


@contextmanager
def on_compile(callback):
    """Within this block, ``callback(kernel name)`` as each kernel starts compiling (from any
    thread: kernels split between threads compile in the worker that first runs them)."""
    _watchers.append(callback)
    try:
        yield
    finally:
        _watchers.remove(callback)


def kernel(name: str, xp=np):
    """The module holding compiled kernel ``name`` ("depthwise", "elementwise", "gemm",
    "narrow_conv", "norm", "pooling", "winograd"), or None when
    the caller should run its numpy code (see the module docstring); ``xp`` is the caller's
    array module."""
    if xp is not np:
        return None
    module = _loaded.get(name)
    if module is not None:  # loaded, so enabled unless numpy_only() is on
        return None if getattr(_local, "numpy_only", False) else module
    if not enabled():
        return None
    with _lock, warnings.catch_warnings():
        # numba warns where it cannot write its cache; the kernel then just compiles per process
        warnings.simplefilter("ignore")
        module = _loaded.get(name) or importlib.import_module(f"{__name__}.{_MODULES[name]}")
        _loaded[name] = module
    return module


@contextmanager
def numpy_only():
    """Within this block (in this thread), every op runs its numpy kernel."""
    before = getattr(_local, "numpy_only", False)
    _local.numpy_only = True
    try:
        yield
    finally:
        _local.numpy_only = before
