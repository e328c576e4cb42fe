"""The clock a timed CPU run reads: the measuring thread's own CPU time when the run is on one
thread, wall time otherwise.

On a shared machine wall time measures the neighbours too: a one-thread forward that is
descheduled half the time takes twice as long on the wall. The thread's CPU time
(``CLOCK_THREAD_CPUTIME_ID``, ``time.thread_time_ns``) counts only the time the thread itself ran,
user and kernel (page faults included), so other processes do not inflate it. It is right only
when all the work runs on the calling thread: on one thread, BLAS (OpenBLAS, MKL), PyTorch's
intra-op pool and flopcount's own kernels (``ops/_parallel.split`` with one thread calls its
function in place) run there. With more threads the work spreads over other threads, whose
time the caller's clock would miss, so those runs keep wall time.

``runtime/threads.limited(n)``, the block every timed CPU run's thread pools are set in, sets the
clock too: :data:`THREAD_CPU` inside ``limited(1)``, :data:`WALL` otherwise (and outside any).
CUDA spans are timed by their own events (``cuda/backend.py``), not by this clock.

    >>> with measuring(1):
    ...     current()
    'thread CPU time'
    >>> current(), for_threads(2)
    ('wall time', 'wall time')
    >>> start = read(); spent = read() - start; spent >= 0
    True
"""

from __future__ import annotations

import contextlib
import time
from typing import Iterator

THREAD_CPU = "thread CPU time"   # the measuring thread's own CPU time: neighbours do not add to it
WALL = "wall time"

_READERS = {THREAD_CPU: lambda: time.thread_time_ns() * 1e-9, WALL: time.perf_counter}
_current = WALL


def for_threads(threads: int | None) -> str:
    """The clock a run on ``threads`` threads is timed by (None: pools left as they are, wall time).

    >>> for_threads(1), for_threads(4), for_threads(None)
    ('thread CPU time', 'wall time', 'wall time')
    """
    return THREAD_CPU if threads == 1 else WALL


def current() -> str:
    """The name of the clock :func:`read` reads now."""
    return _current


def read() -> float:
    """Seconds on the current clock (differences only mean anything, read in one thread)."""
    return _READERS[_current]()


def set_for(threads: int | None):
    """Read the clock for a run on ``threads`` threads from now on; returns a callable that
    puts back the clock before (``threads.limited`` sets it beside the thread pools)."""
    global _current
    before, _current = _current, for_threads(threads)

    def restore() -> None:
        global _current
        _current = before

    return restore


@contextlib.contextmanager
def measuring(threads: int | None) -> Iterator[str]:
    """Read the clock for a run on ``threads`` threads inside the block (yielded: its name);
    the clock before after it."""
    restore = set_for(threads)
    try:
        yield _current
    finally:
        restore()


__all__ = ["THREAD_CPU", "WALL", "for_threads", "current", "read", "set_for", "measuring"]
