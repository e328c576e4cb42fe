"""Splitting a compute-bound CPU kernel between the process's threads.

numpy runs each ufunc on one core, while BLAS runs a matmul on all of them (as many threads as
``OMP_NUM_THREADS`` / ``OPENBLAS_NUM_THREADS`` say). numpy releases the GIL inside its loops, so
other cores can run parts of the same ufunc from Python threads. This pays only for ufuncs that
are compute-bound (numpy's NaN-keeping ``maximum`` runs well below memory bandwidth, so a ReLU on
two threads takes clearly less time) and only with one call per thread: memory-bound ones (a
multiply-add) gain nothing, and many small calls per thread hand the GIL back and forth (measured
slower than one thread). The figures are in benchmarks/RESULTS.md, "Figures behind design choices
in the code".
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

# elements a thread must get before a hand-off pays (a submit and a wait cost tens of
# microseconds, as much as a small ufunc call itself)
MIN_PER_THREAD = 1 << 17


def _threads() -> int:
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        value = os.environ.get(var, "")
        if value.isdigit() and int(value) > 0:
            return int(value)
    return os.cpu_count() or 1


THREADS = _threads()
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()
_local = threading.local()


def _worker_init() -> None:
    _local.worker = True


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:  # kernels may run in several threads at once: one pool for all of them
        if _pool is None:
            _pool = ThreadPoolExecutor(THREADS - 1, thread_name_prefix="flopcount-kernel",
                                       initializer=_worker_init)
    return _pool


def set_threads(n: int):
    """Split kernels between ``n`` threads from now on; returns a callable that restores the
    number before (``runtime/threads.py`` sets every pool of a timed run this way)."""
    before = THREADS
    _resize(n)
    return lambda: _resize(before)


def _resize(n: int) -> None:
    global THREADS, _pool
    with _pool_lock:
        THREADS = max(1, int(n))
        if _pool is not None and _pool._max_workers < THREADS - 1:
            _pool.shutdown(wait=False)   # idle workers end; a larger pool is made on first use
            _pool = None


def split(n: int, fn, min_per_thread: int = MIN_PER_THREAD) -> None:
    """Call ``fn(start, stop)`` once per thread over consecutive parts of ``[0, n)``, each at
    least ``min_per_thread`` long (once over all of it when ``n`` is small or this is a worker
    thread already). ``fn`` must only write elements ``start:stop`` of its outputs."""
    parts = min(THREADS, n // max(1, min_per_thread))
    if parts <= 1 or getattr(_local, "worker", False):
        fn(0, n)
        return
    bounds = [n * i // parts for i in range(parts + 1)]
    futures = [_executor().submit(fn, bounds[i], bounds[i + 1]) for i in range(1, parts)]
    try:
        fn(bounds[0], bounds[1])
    finally:
        for f in futures:
            f.result()  # waits, and raises a worker's error here
