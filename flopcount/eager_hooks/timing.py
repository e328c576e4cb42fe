"""Measured latency per module of a real run (global module hooks).

Every span is device-synchronized through the backend (``synchronize`` and its timer: CUDA
events on GPU, ``perf_counter`` on CPU). Warm-up runs come first and are discarded; then each
of ``repeat`` runs is measured and the median and minimum are kept. The three kinds of spans
come from separate runs so that per-module synchronization does not inflate the whole-model
time, and per-op synchronization does not inflate the per-module times.
"""

from __future__ import annotations

import contextlib
from collections import defaultdict

from ..recording.timing import median_min
from ..runtime import nn
from ..runtime.device import backend


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
