"""``engine="torch"``: the user's PyTorch model timed by PyTorch itself, module by module, beside
flopcount's counts of the same model.

The module runs on the inputs it was captured with, in eval mode and without gradients.
On the CPU every span reads ``runtime.clock``: the calling thread's own CPU time when the run is
on one thread (PyTorch's intra-op work then runs on that thread), wall time otherwise; on a GPU,
wall time after ``torch.cuda.synchronize``.
Whole forwards (no hooks) and hooked forwards alternate run by run after the warm-up, so both
see the same machine. In a hooked run each module's forward pre-hook and forward hook take a
synchronized timestamp (``torch.cuda.synchronize`` when the model is on a GPU); the difference
is the module's inclusive time, summed over its calls in that run. Reported: the whole
forward's median over ``repeat`` runs; each module's time in the median hooked run (the run
whose model total is the median, so the rows add up as one run does) and its minimum over the
runs. The hooks are removed afterwards, and the module's flags are put back.

    times = time_module(model, (x,), {}, warmup=1, repeat=5)
    times.whole, times.modules["layer1.0.conv1"]     # (median ms, min ms)

**Per op.** The module is captured again as flopcount captured it (``torch.export``, eval mode),
and that ATen graph runs node by node. On the CPU each node is timed by the same clock as the
modules; on a GPU the graph runs under PyTorch's profiler, each node inside a
``record_function`` of its name, and a node's time is the CUDA kernels' time inside it. Nodes are joined to flopcount's op records by name (each record's
``source`` is the node it was converted from), a node's time shared over its records as
onnxruntime's nodes' are (``onnxruntime_engine.shares``); the op rows take their records' times.

    ops = time_ops(model, (x,), {}, repeat=5)      # {node name: median ms}, or a reason string
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field

from ..runtime import clock, errors
from .native_stderr import without_lines

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
    now = time.perf_counter if cuda else clock.read
    paths = {id(m): path for path, m in module.named_modules()}
    spent: dict = {}
    starts: dict = {}

    def before(m, *_):
        sync()
        starts.setdefault(id(m), []).append(now())

    def after(m, *_):
        sync()
        begun = starts[id(m)].pop()
        path = paths[id(m)]
        spent[path] = spent.get(path, 0.0) + now() - begun

    def whole_run() -> float:
        sync()
        begun = now()
        module(*args, **kwargs)
        sync()
        return now() - begun

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


_RANGE = "flopcount::"   # the profiler ranges' prefix: one range per graph node


def time_ops(module, args: tuple, kwargs: dict, *, repeat: int = 5):
    """{ATen graph node name: median ms over ``repeat`` runs} of ``module`` captured as flopcount
    captures it and run node by node (module docstring); a string saying why not where the
    capture or the run fails."""
    captured = capture_graph(module, args, kwargs)
    return captured if isinstance(captured, str) else time_captured(captured, args, kwargs, repeat=repeat)


def release_plan(nodes: list) -> list:
    """For each of ``nodes`` (an ATen graph's call_function nodes, in order), the names of the
    node outputs no later node reads, to drop once it has run, as PyTorch's own eager run frees
    them. A run that kept every output timed its late nodes on fresh memory, many times slower
    than its early ones (RESULTS.md)."""
    last = {node.name: i for i, node in enumerate(nodes)}   # unread: dropped where it is made
    for i, node in enumerate(nodes):
        for used in node.all_input_nodes:
            if used.name in last:
                last[used.name] = i
    plan: list = [[] for _ in nodes]
    for name, i in last.items():
        plan[i].append(name)
    return plan


def capture_graph(module, args: tuple, kwargs: dict):
    """``module``'s ATen graph as flopcount captures it, for :func:`time_captured` (which can time
    it again and again: the capture costs far more than a run); a string saying why not."""
    from ..runtime.torch.capture import capture

    was_training = module.training
    try:
        return capture(module, tuple(args), dict(kwargs))
    except Exception as exc:  # the engine's module times stand; the op times are said to be missing
        return f"capturing it again failed ({type(exc).__name__})"
    finally:
        module.train(was_training)


def time_captured(captured, args: tuple, kwargs: dict, *, repeat: int = 5):
    """:func:`time_ops` on a graph :func:`capture_graph` captured from the module ``args`` and
    ``kwargs`` are inputs of."""
    import torch
    from torch.fx.node import map_arg

    feeds = {name: tensor for name, (_, tensor, _) in captured.params.items()}
    flat = list(args) + [kwargs[k] for k in kwargs]
    feeds.update(zip(captured.inputs, [t for t in flat if isinstance(t, torch.Tensor)]))
    feeds.update(captured.constants)
    nodes = [n for n in captured.graph.nodes if n.op == "call_function"]
    cuda = any(getattr(t, "device", None) is not None and t.device.type == "cuda" for t in feeds.values())
    released = release_plan(nodes)

    samples: dict = {}

    def run(ranges: bool, timed: bool = False) -> None:
        values = dict(feeds)
        for node, done in zip(nodes, released):
            a = map_arg(node.args, lambda n: values[n.name])
            k = map_arg(node.kwargs, lambda n: values[n.name])
            if ranges:
                with torch.profiler.record_function(_RANGE + node.name):
                    values[node.name] = node.target(*a, **k)
            elif timed:
                begun = clock.read()
                values[node.name] = node.target(*a, **k)
                samples.setdefault(node.name, []).append((clock.read() - begun) * 1e3)
            else:
                values[node.name] = node.target(*a, **k)
            for name in done:
                del values[name]

    if not cuda:
        try:
            with torch.no_grad():
                run(False)   # warm: the node-by-node path's first call
                for _ in range(repeat):
                    run(False, timed=True)
        except Exception as exc:
            return f"running its ATen graph node by node failed ({type(exc).__name__})"
        return {name: statistics.median(ms) for name, ms in samples.items()}

    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    try:
        with torch.no_grad():
            run(False)   # warm: the node-by-node path's first call
            prof = torch.profiler.profile(activities=activities)
            with without_lines("USDT:"):   # the profiler's own start and stop lines, from C++
                prof.start()
            try:
                for _ in range(repeat):
                    run(True)
                    torch.cuda.synchronize()
            finally:
                with without_lines("USDT:"):
                    prof.stop()
    except Exception as exc:
        return f"running its ATen graph node by node failed ({type(exc).__name__})"
    for event in prof.events():
        if event.name.startswith(_RANGE):
            us = event.device_time_total
            samples.setdefault(event.name[len(_RANGE):], []).append(us / 1e3)
    return {name: statistics.median(ms) for name, ms in samples.items()}


OPS_NOTE = ("op rows: PyTorch's times of the ATen graph's nodes, run one by one (a node's time "
            "shared over the ops flopcount converted it to, by their FLOPs)")


def join(report, times: ModuleTimes, ops=None) -> None:
    """Put the measured times on the report's module rows (their FLOP/s follow from them) and
    the whole forward on the report; ``ops`` (``time_ops``'s result) on the op records and op
    rows, or a note saying why they have none."""
    from .onnxruntime_engine import shares

    for row in report.rows:
        measured = times.modules.get(row.name) if row.kind != "op" else None
        row.latency_ms, row.latency_min_ms = measured if measured else (None, None)
    records = report.by_op("forward")
    for record in records:
        record.latency_ms = None
    if isinstance(ops, dict):
        by_source: dict = {}
        for record in records:
            if record.source:
                by_source.setdefault(record.source, []).append(record)
        for name, ms in ops.items():
            mine = by_source.get(name, [])
            for record, share in zip(mine, shares(mine)):
                record.latency_ms = (record.latency_ms or 0.0) + ms * share
        rows = {r.name: r for r in report.rows if r.kind == "op"}
        for record in records:
            if record.latency_ms is not None and record.name in rows:
                rows[record.name].latency_ms = record.latency_ms
        timed = sum(1 for r in records if r.latency_ms is not None and (r.macs or r.flops))
        counted = sum(1 for r in records if r.macs or r.flops)
        report.notes.append(OPS_NOTE + f"; {timed} of the {counted} ops with counts joined")
    elif ops is not None:
        report.notes.append(f"op rows have no PyTorch times: {ops}")
    report.latency_ms, report.latency_min_ms = times.whole
    report.engine = NAME


__all__ = ["ModuleTimes", "time_module", "time_ops", "capture_graph", "time_captured", "join", "OPS_NOTE", "NAME"]
