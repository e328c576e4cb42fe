"""Measured latency of a real run: whole model, per module and per op.

Every span is device-synchronized through the backend (``synchronize`` and its timer: CUDA
events on GPU, ``perf_counter`` on CPU). Warm-up runs come first and are discarded; then each
of ``repeat`` runs is measured and the median and minimum are kept. The three kinds of spans
come from separate runs so that per-module synchronization does not inflate the whole-model
time, and per-op synchronization does not inflate the per-module times.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections import defaultdict

from ..runtime import nn
from ..runtime.device import backend
from ..runtime.dispatch import observe


def median_min(samples: list) -> tuple:
    """(median, min) in milliseconds of a list of seconds (``(None, None)`` when empty)."""
    if not samples:
        return None, None
    return statistics.median(samples) * 1e3, min(samples) * 1e3


def time_calls(fn, device, warmup: int, repeat: int) -> list:
    """Seconds of each of ``repeat`` synchronized calls of ``fn`` after ``warmup`` calls."""
    be = backend(device)
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(repeat):
        be.synchronize()
        start = be.timer_start()
        fn()
        out.append(be.timer_stop(start))
    return out


class ModuleTimer:
    """Global module hooks that time every call of the model's modules (synchronized)."""

    def __init__(self, model, device):
        self.paths = {id(m): name for name, m in model.named_modules()}
        self.be = backend(device)
        self.stack: list = []
        self.run_totals: dict = defaultdict(float)

    def pre_hook(self, module, args):
        if id(module) in self.paths:
            self.be.synchronize()
            self.stack.append(self.be.timer_start())

    def post_hook(self, module, args, output):
        if id(module) in self.paths and self.stack:
            self.run_totals[self.paths[id(module)]] += self.be.timer_stop(self.stack.pop())

    @contextlib.contextmanager
    def attached(self):
        try:
            with nn.register_module_forward_pre_hook(self.pre_hook), nn.register_module_forward_hook(self.post_hook):
                yield self
        finally:
            self.stack.clear()


def time_modules(model, fn, device, repeat: int) -> dict:
    """path -> (median ms, min ms) of the time spent in each module per run."""
    samples = defaultdict(list)
    timer = ModuleTimer(model, device)
    with timer.attached():
        for _ in range(repeat):
            timer.run_totals = defaultdict(float)
            fn()
            for path, seconds in timer.run_totals.items():
                samples[path].append(seconds)
    return {path: median_min(s) for path, s in samples.items()}


class _OpTimer:
    timing = True  # the dispatcher synchronizes and times each op for us

    def __init__(self, start: float):
        self.elapsed: list = []
        self.ends: list = []
        self.phases: list = []
        self.t0 = start

    def on_op(self, event) -> None:
        self.elapsed.append(event.elapsed)
        self.ends.append(time.perf_counter() - self.t0)
        self.phases.append(event.phase)


def time_ops(fn, repeat: int) -> tuple:
    """(median ms per op, start ms per op of the last run) over ``repeat`` runs of ``fn``;
    ``None`` where runs dispatched a different number of ops (the model is not deterministic)."""
    runs = []
    for _ in range(repeat):
        timer = _OpTimer(time.perf_counter())
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
