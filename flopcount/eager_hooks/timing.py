"""Measured latency per module of a real run (the thread's module-call observer).

Every span is device-synchronized through the backend (``synchronize`` and its timer: CUDA
events on GPU, ``runtime.clock`` on CPU: the thread's own CPU time on one thread, else wall time). Warm-up runs come first and are discarded; then each
of ``repeat`` runs is measured and the median and minimum are kept. The three kinds of spans
come from separate runs so that per-module synchronization does not inflate the whole-model
time, and per-op synchronization does not inflate the per-module times.

The timer observes module calls (``nn.observe_module_calls``) rather than installing global
module hooks: the observer belongs to the thread that runs the model, so a profile in another
thread neither fires it nor is timed by it.
"""

from __future__ import annotations

from collections import defaultdict

from ..recording.timing import median_min
from ..runtime import nn
from ..runtime.device import backend


class ModuleTimer:
    """Times every call of the model's modules (synchronized); nested calls are inside their parent's."""

    def __init__(self, model, device):
        self.paths = {id(m): name for name, m in model.named_modules()}
        self.be = backend(device)
        self.run_totals: dict = defaultdict(float)

    def record_call(self, module, args: tuple, kwargs: dict):
        path = self.paths.get(id(module))
        if path is None:
            return module.forward(*args, **kwargs)
        be = self.be
        be.synchronize()
        start = be.timer_start()
        output = module.forward(*args, **kwargs)
        self.run_totals[path] += be.timer_stop(start)
        return output


def time_modules(model, fn, device, repeat: int) -> dict:
    """path -> (median ms, min ms) of the time spent in each module per run."""
    samples = defaultdict(list)
    timer = ModuleTimer(model, device)
    with nn.observe_module_calls(timer):
        for _ in range(repeat):
            timer.run_totals = defaultdict(float)
            fn()
            for path, seconds in timer.run_totals.items():
                samples[path].append(seconds)
    return {path: median_min(s) for path, s in samples.items()}
