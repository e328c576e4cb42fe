"""Running a counting view on a model: the eager view (a Module's hooks on a real run) or the
graph view (every traced op parsed), under a lock per model and with the cyclic collector
paused. ``profile()`` and ``get_model_complexity_info()`` both count through :func:`run_view`.

    >>> import flopcount.runtime as rt
    >>> run_view("eager", rt.nn.Linear(3, 2), (rt.ones(4, 3),), {}).macs
    24
"""

from __future__ import annotations

import contextlib
import gc
import threading
import weakref
from typing import Iterator

import numpy as np

from ..eager_hooks import profile_eager
from ..graph_parser import profile_graph
from ..report import Report
from ..runtime.graph import LazyGraph
from ..runtime.nn.modules.module import Module

MODES = ("eager", "graph")


_gc_lock = threading.Lock()
_gc_pausers = 0            # views running now, in any thread
_gc_was_enabled = False    # the collector's state before the first of them paused it


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Python's cyclic collector off while a view runs. Counting keeps every op's record (specs,
    events, rows) until the report is built, and the collector, triggered by their number,
    rescans the growing heap again and again, so counting grew faster than the model's depth
    (benchmarks/RESULTS.md, "Figures behind design choices in the code"). The runs make no cyclic garbage (autograd
    releases its nodes after each backward), and the collector resumes when the last view running
    in any thread is done."""
    global _gc_pausers, _gc_was_enabled
    with _gc_lock:
        if _gc_pausers == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_pausers += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_pausers -= 1
            if _gc_pausers == 0 and _gc_was_enabled:
                gc.enable()


_model_locks: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_model_locks_guard = threading.Lock()


def _model_lock(model) -> threading.RLock:
    """One lock per model object. Profiling a model notes things on its tensors and sets and
    restores its flags, buffers and gradients, so two profiles of the same model from two
    threads take turns; profiles of different models run at the same time."""
    with _model_locks_guard:
        lock = _model_locks.get(model)
        if lock is None:
            lock = _model_locks[model] = threading.RLock()
        return lock


def run_view(mode: str, model, args: tuple, kwargs: dict, **options) -> Report:
    """The eager view (a Module's hooks) or the graph view. NaN and Inf in the inputs (or made
    by the model) are the data's business, as in PyTorch: counting reads shapes only, and the
    runs compute on them without numpy's floating-point warnings."""
    with _model_lock(model), np.errstate(all="ignore"), _gc_paused():
        if mode == "eager" and isinstance(model, Module):
            return profile_eager(model, args, kwargs, **options)
        return profile_graph(model, args, kwargs, **options)


def eager_form(model):
    """``rt.compile(module)`` is its module, compiled on each call for the inputs given: profiled
    as that module (the graph view traces it for the same inputs)."""
    return model.module if isinstance(model, LazyGraph) else model


__all__ = ["MODES", "run_view", "eager_form"]
