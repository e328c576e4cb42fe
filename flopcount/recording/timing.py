"""Synchronized timing both views use: whole calls and per-op spans (the dispatcher times each
op when an observer sets ``timing``), reduced to median and minimum.

Every span is device-synchronized through the backend (``synchronize`` and its timer: CUDA
events on GPU, ``runtime.clock`` on CPU: the thread's own CPU time on one thread, else wall
time); warm-up calls come first and are discarded.
"""

from __future__ import annotations

import contextlib
import statistics

from ..runtime import clock
from ..runtime.allocator import keep_freed_memory
from ..runtime.device import backend
from ..runtime.dispatch import observe


# a timed run in which a CPU kernel compiled is run again, at most this many times per timing:
# the first --latency run after installing compiles kernels even with --warmup 0
REDO_LIMIT = 3


def without_compilation(run, repeat: int) -> list:
    """``repeat`` results of ``run()``, leaving out any run during which a CPU kernel compiled
    (each is run again, up to REDO_LIMIT times in all): the first run after installing then
    gives the figures of the second.

    >>> without_compilation(lambda: 1.0, 3)
    [1.0, 1.0, 1.0]
    """
    from ..runtime import cpu_kernels

    out: list = []
    redone = 0
    while len(out) < repeat:
        before = cpu_kernels.compilations()
        result = run()
        if cpu_kernels.compilations() != before and redone < REDO_LIMIT:
            redone += 1
            continue
        out.append(result)
    return out


def median_min(samples: list) -> tuple:
    """(median, min) in milliseconds of a list of seconds (``(None, None)`` when empty)."""
    if not samples:
        return None, None
    return statistics.median(samples) * 1e3, min(samples) * 1e3


def time_calls(fn, device, warmup: int, repeat: int) -> list:
    """Seconds of each of ``repeat`` synchronized calls of ``fn`` after ``warmup`` calls."""
    be = backend(device)
    if be.name == "cpu":
        keep_freed_memory()  # as PyTorch's and onnxruntime's arenas: no page faults in the timed runs
    for _ in range(warmup):
        fn()

    def once() -> float:
        be.synchronize()
        start = be.timer_start()
        fn()
        return be.timer_stop(start)

    return without_compilation(once, repeat)


def time_backward(step, device, warmup: int, repeat: int) -> list:
    """Seconds of the backward pass alone in each of ``repeat`` training steps after ``warmup``
    untimed ones. ``step(clock)`` runs one step with ``clock()`` around its backward
    (``recording.steps.training_step``): the backward is timed on its own, synchronized, not
    as a step's time less a forward time taken in other runs (which can come out at zero or
    below when the forward runs were slower). Empty when the step has no backward (no output
    needs a gradient).

    >>> from flopcount.recording.steps import training_step
    >>> import flopcount.runtime as rt
    >>> w = rt.randn(4, 4, requires_grad=True)
    >>> spans = time_backward(lambda clock: training_step(lambda: (w @ w).sum(), [w], clock), w.device, 0, 3)
    >>> len(spans), all(s > 0 for s in spans)
    (3, True)
    """
    be = backend(device)
    spans: list = []

    @contextlib.contextmanager
    def clock():
        be.synchronize()
        start = be.timer_start()
        yield
        spans.append(be.timer_stop(start))

    def once():
        count = len(spans)
        step(clock)
        return spans.pop() if len(spans) > count else None

    for _ in range(warmup):
        step(None)
    return [s for s in without_compilation(once, repeat) if s is not None]


class _OpTimer:
    timing = True  # the dispatcher synchronizes and times each op for us

    def __init__(self, start: float):
        self.elapsed: list = []
        self.ends: list = []
        self.phases: list = []
        self.t0 = start

    def on_op(self, event) -> None:
        self.elapsed.append(event.elapsed)
        self.ends.append(clock.read() - self.t0)   # on the clock the op's span was read on
        self.phases.append(event.phase)


def time_ops(fn, repeat: int) -> tuple:
    """(median ms per op, start ms per op of the last run) over ``repeat`` runs of ``fn``;
    ``None`` where runs dispatched a different number of ops (the model is not deterministic)."""
    runs = []
    for _ in range(repeat):
        timer = _OpTimer(clock.read())
        with observe(timer):
            fn()
        runs.append(timer)
    n = len(runs[0].elapsed)
    if any(len(r.elapsed) != n for r in runs):
        return None, None
    medians = []
    for i in range(n):
        values = [r.elapsed[i] for r in runs if r.elapsed[i] is not None]
        medians.append(statistics.median(values) * 1e3 if values else None)
    last = runs[-1]
    starts = [(end - (el or 0.0)) * 1e3 for end, el in zip(last.ends, last.elapsed)]
    return medians, starts
