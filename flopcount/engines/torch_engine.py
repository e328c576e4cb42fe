"""``engine="torch"``: the user's PyTorch model timed by PyTorch itself, module by module, beside
flopcount's counts of the same model.

The module runs on the inputs it was captured with, in eval mode and without gradients.
Whole forwards (no hooks) and hooked forwards alternate run by run after the warm-up, so both
see the same machine. In a hooked run each module's forward pre-hook and forward hook take a
synchronized timestamp (``torch.cuda.synchronize`` when the model is on a GPU); the difference
is the module's inclusive time, summed over its calls in that run. Reported: the whole
forward's median over ``repeat`` runs; each module's time in the median hooked run (the run
whose model total is the median, so the rows add up as one run does) and its minimum over the
runs. The hooks are removed afterwards, and the module's flags are put back.

    times = time_module(model, (x,), {}, warmup=1, repeat=5)
    times.whole, times.modules["layer1.0.conv1"]     # (median ms, min ms)
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field

from ..runtime import errors

NAME = "torch"


@dataclass
class ModuleTimes:
    """Medians and minima in milliseconds: ``whole`` (a forward without hooks) and
    ``modules`` {dotted path: (median, min)} ('' is the model)."""

    whole: tuple
    modules: dict = field(default_factory=dict)


def _median_min(samples: list) -> tuple:
    return statistics.median(samples) * 1e3, min(samples) * 1e3


def time_module(module, args: tuple, kwargs: dict, *, warmup: int = 1, repeat: int = 5) -> ModuleTimes:
    """Time ``module(*args, **kwargs)`` (torch tensors) as a whole and per module (see above)."""
    import torch

    tensors = [t for t in list(module.parameters()) + list(args) + list(kwargs.values())
               if isinstance(t, torch.Tensor)]
    if any(t.device.type == "meta" for t in tensors):
        raise errors.DeviceError(f"engine 'torch': {type(module).__name__} is on torch's meta device; it has no "
                                 f"weights to run (build it on the CPU or a GPU to time it)")
    cuda = any(t.device.type == "cuda" for t in tensors)
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    paths = {id(m): path for path, m in module.named_modules()}
    spent: dict = {}
    starts: dict = {}

    def before(m, *_):
        sync()
        starts.setdefault(id(m), []).append(time.perf_counter())

    def after(m, *_):
        sync()
        begun = starts[id(m)].pop()
        path = paths[id(m)]
        spent[path] = spent.get(path, 0.0) + time.perf_counter() - begun

    def whole_run() -> float:
        sync()
        begun = time.perf_counter()
        module(*args, **kwargs)
        sync()
        return time.perf_counter() - begun

    was_training = module.training
    module.eval()
    wholes, runs = [], []
    try:
        with torch.no_grad():
            for _ in range(warmup):
                module(*args, **kwargs)
            for _ in range(repeat):
                wholes.append(whole_run())
                handles = []
                for m in module.modules():
                    handles.append(m.register_forward_pre_hook(before))
                    handles.append(m.register_forward_hook(after))
                spent.clear()
                try:
                    module(*args, **kwargs)
                finally:
                    for handle in handles:
                        handle.remove()
                runs.append(dict(spent))
    finally:
        module.train(was_training)
    return ModuleTimes(_median_min(wholes), _median_run(runs))


def _median_run(runs: list) -> dict:
    """{path: (ms in the median run, min ms over all runs)}. The median run is the hooked run
    whose model total is the median: its modules' times add up as that run's did. Medians taken
    module by module would not: a page fault or a preemption lands in a different module in
    each run, and every module's median leaves it out (on a busy CPU their sum fell to half
    the whole forward)."""
    ordered = sorted(runs, key=lambda run: run.get("", 0.0))
    median = ordered[(len(ordered) - 1) // 2]
    return {path: (seconds * 1e3, min(run.get(path, seconds) for run in runs) * 1e3)
            for path, seconds in median.items()}


def join(report, times: ModuleTimes) -> None:
    """Put the measured times on the report's module rows (their FLOP/s follow from them) and
    the whole forward on the report; op rows keep no latency (torch ran them, not flopcount)."""
    for row in report.rows:
        measured = times.modules.get(row.name) if row.kind != "op" else None
        row.latency_ms, row.latency_min_ms = measured if measured else (None, None)
    report.latency_ms, report.latency_min_ms = times.whole
    report.engine = NAME


__all__ = ["ModuleTimes", "time_module", "join", "NAME"]
