"""Running a graph for what shapes cannot tell: per-node latency, backward work, peak memory.

Everything runs through the graph's own executor. For the backward pass the executor runs
each node under its ``NodeScope`` (scope and node index): autograd remembers it for the node's
gradient, and the backward ops then arrive at the observer naming the exact node they
differentiate.
"""

from __future__ import annotations

import statistics
import time

from ..recording import pricing
from ..recording.steps import training_step
from ..runtime.backend import Backend
from ..runtime.device import backend
from ..runtime.dispatch import no_grad, observe
from ..runtime.graph import GraphModule, executor
from ..runtime.graph.executor import NodeScope
from ..runtime.graph.tree import tensor_leaves
from ..runtime.registry import Cost


def node_of(module) -> int | None:
    """The index of the node an op came from, when the executor named it (``None`` otherwise)."""
    return module.node if isinstance(module, NodeScope) else None


class _Collector:
    """Observer keeping the backward ops (specs only) and their measured time."""

    def __init__(self, timing: bool = False):
        self.timing = timing
        self.events: list = []

    def on_op(self, event) -> None:
        if event.phase != "backward":
            return
        from ..runtime.registry import Spec

        ins = tuple(None if t is None else Spec(t.shape, t.dtype, t.device) for t in event.inputs)
        outs = tuple(Spec(t.shape, t.dtype, t.device) for t in event.outputs)
        call = pricing.OpCall(event.op, outs if len(outs) > 1 else outs[0], ins, event.attrs)
        self.events.append((call, node_of(event.module), event.elapsed))


def _grad_state(graph) -> list:
    return [(t, t.grad) for t in graph.tensors.values()]


def _backward_step(runnable: GraphModule, args, kwargs, clock=None):
    """A training step through the executor, each node under its NodeScope (``clock`` around
    the backward pass: ``training_step``)."""
    return training_step(lambda: executor.run(runnable, args, kwargs, node_scopes=True),
                         runnable.graph.tensors.values(), clock)


def _recorder(graph, args, kwargs):
    """A Recorder of the executor's ops, the graph's parameters, buffers and inputs as its roots."""
    from ..recording.params import ModelIndex
    from ..recording.recorder import Recorder

    params = [graph.tensors[n] for n, v in graph.parameters.items() if v.kind == "param"]
    buffers = [graph.tensors[n] for n, v in graph.parameters.items() if v.kind == "buffer"]
    return Recorder(None, tensor_leaves((list(args), kwargs)), index=ModelIndex.of_tensors(params, buffers))


def predict_training_peak(runnable: GraphModule, args, kwargs) -> int | None:
    """The training step's activation peak, predicted from the step run on shapes only
    (``recording.memory.predict_before_running``), before it runs for real."""
    from ..recording import memory as mem

    graph = runnable.graph
    saved = _grad_state(graph)
    recorder = _recorder(graph, args, kwargs)
    try:
        return mem.predict_before_running(lambda: _backward_step(runnable, args, kwargs), recorder,
                                          training=True, calls=False)
    finally:
        for t, g in saved:
            t.grad = g


def run_backward(runnable: GraphModule, args, kwargs, convention, timing: bool = False, repeat: int = 1,
                 measure_on=None) -> tuple:
    """One training step (forward with grad on, backward seeded with ones) through the
    executor: (backward Cost per node, backward latency ms per node or None, OpRecords,
    memory dict). The first step is also recorded for the memory prediction (the eager view's
    over the ops the executor dispatches); with ``measure_on`` (a device) one more step runs
    inside the backend's tracker."""
    from ..recording import memory as mem

    graph = runnable.graph
    saved = _grad_state(graph)
    recorder = _recorder(graph, args, kwargs)
    runs = []
    memory = {}
    warmup = 1 if timing else 0  # a discarded first run keeps kernel compilation (CUDA) out of the times
    try:
        for i in range(warmup + max(1, repeat if timing else 1)):
            collector = _Collector(timing)
            with observe(collector):
                if i == 0:
                    with recorder.attached(calls=False):
                        out = _backward_step(runnable, args, kwargs)
                    outputs = [recorder.serial(t) for t in tensor_leaves(out)]
                    del out
                else:
                    _backward_step(runnable, args, kwargs)
            if i >= warmup:
                runs.append(collector.events)
        if measure_on is not None:
            memory["measured"] = _measure_step(runnable, args, kwargs, measure_on)
    finally:
        for t, g in saved:
            t.grad = g
    memory["predicted"] = mem.predicted_training_peak(recorder.events, outputs)
    events = runs[0]
    n = len(graph.nodes)
    per_node = [Cost() for _ in range(n)]
    latency = [0.0] * n if timing else None
    records = []
    costs, owns = pricing.price([call for call, _, _ in events], convention)
    for k, ((call, node, _), cost, own) in enumerate(zip(events, costs, owns)):
        ms = None
        if timing and all(len(r) == len(events) for r in runs):
            samples = [r[k][2] for r in runs if r[k][2] is not None]
            ms = statistics.median(samples) * 1e3 if samples else None
        scope, name = "", call.op.name
        if node is not None and node < n:
            per_node[node] = per_node[node] + pricing.macs_flops(cost)
            if ms is not None:
                latency[node] += ms
            gnode = graph.nodes[node]
            scope, name = gnode.scope, f"{gnode.scope}/{gnode.name}/grad/{call.op.name}"
        records.append(pricing.op_record(call, cost, own, name=name, scope=scope, phase="backward",
                                         counted=cost is not None, latency_ms=ms))
    return per_node, latency, records, memory


def _measure_step(runnable: GraphModule, args, kwargs, device) -> tuple:
    """(tracker peak, most bytes held between two ops) of one more training step."""
    be = backend(device)
    held = [0]

    class Sampler:
        def on_op(self, event):
            held.append(tracker.current())

    for t in runnable.graph.tensors.values():
        t.grad = None
    with be.track_memory() as tracker, observe(Sampler()):
        out = _backward_step(runnable, args, kwargs)
        del out
    return tracker.peak, max(held)


def node_libraries(runnable: GraphModule, args, kwargs) -> list:
    """The library path each node's kernels took in one run (``OpEvent.library``: "cuBLAS",
    "own kernel", ... on a GPU; None on the CPU), the names of a node's ops joined."""
    index = {id(n): i for i, n in enumerate(runnable.graph.nodes)}
    found: list = [None] * len(index)
    seen: list = []

    class Paths:
        def on_op(self, event) -> None:
            if event.library is not None and event.library not in seen:
                seen.append(event.library)

    def after(node, outputs):
        found[index[id(node)]] = " + ".join(seen) if seen else None
        seen.clear()

    with observe(Paths()):
        runnable.run(*args, after=after, **kwargs)
    return found


def time_graph_and_nodes(runnable: GraphModule, args, kwargs, device, warmup: int, repeat: int) -> dict:
    """Whole-graph runs and per-node runs, interleaved so that both see the same machine.

    A whole run has no per-node synchronization (the graph's latency); a per-node run times
    each node between the executor's callbacks, synchronized before and after. Returns
    ``whole`` (median ms, min ms), and per node ``median``, ``min``, ``start`` (ms from the
    start of the last per-node run, for the trace) and ``library`` (``node_libraries``, from
    one more untimed run; None each on the CPU).
    """
    from ..recording.timing import median_min, without_compilation

    be = backend(device)
    graph = runnable.graph
    index = {id(n): i for i, n in enumerate(graph.nodes)}
    samples = [[] for _ in graph.nodes]
    starts = [None] * len(graph.nodes)
    whole = []
    clock = {}

    def before(node, inputs):
        be.synchronize()
        clock["t"] = be.timer_start()
        clock["wall"] = time.perf_counter()

    def after(node, outputs):
        elapsed = be.timer_stop(clock["t"])
        i = index[id(node)]
        clock["nodes"].append((i, elapsed, (clock["wall"] - clock["run"]) * 1e3))

    def pair() -> tuple:
        """One whole run and one per-node run: (whole seconds, [(node, seconds, start ms)])."""
        be.synchronize()
        t0 = be.timer_start()
        runnable(*args, **kwargs)
        spent = be.timer_stop(t0)
        clock["run"], clock["nodes"] = time.perf_counter(), []
        runnable.run(*args, before=before, after=after, **kwargs)
        return spent, clock["nodes"]

    with no_grad():
        # one more untimed run where a backend has paths to tell (the GPU's)
        has_paths = type(be).kernel_library is not Backend.kernel_library
        libraries = node_libraries(runnable, args, kwargs) if has_paths else [None] * len(graph.nodes)
        for _ in range(warmup):
            runnable(*args, **kwargs)
        for spent, nodes in without_compilation(pair, repeat):
            whole.append(spent)
            for i, elapsed, start in nodes:
                samples[i].append(elapsed)
                starts[i] = start
    return {"whole": median_min(whole),
            "median": [statistics.median(s) * 1e3 if s else None for s in samples],
            "min": [min(s) * 1e3 if s else None for s in samples],
            "start": starts, "library": libraries}


def time_backward_pass(runnable: GraphModule, args, kwargs, device, repeat: int) -> float | None:
    """Median ms of the backward pass alone, timed inside training steps through the executor
    (None when no output needs a gradient). One untimed step first: its first call builds the
    backward program."""
    from ..recording.timing import median_min, time_backward

    saved = _grad_state(runnable.graph)
    try:
        return median_min(time_backward(lambda clock: _backward_step(runnable, args, kwargs, clock), device, 1,
                                        repeat))[0]
    finally:
        for t, g in saved:
            t.grad = g


def measure_peak(runnable: GraphModule, args, kwargs, device) -> tuple:
    """(peak bytes the backend allocated during one inference run, the largest number of bytes
    held between two nodes). The first includes each kernel's temporaries; the second is what
    liveness predicts: the activations alive while a node runs, sampled when it returns."""
    be = backend(device)
    with no_grad():
        # the first run builds the executor's program, and the CPU kernels' kept transforms of
        # read-only weights (Winograd's, the packed GEMM's): not the model's activations. A
        # callback makes it the node-by-node program measured below (a plain call would build
        # the plain run's)
        runnable.run(*args, after=lambda node, outs: None, **kwargs)
    held = [0]
    with no_grad(), be.track_memory() as tracker:
        out = runnable.run(*args, after=lambda node, outs: held.append(tracker.current()), **kwargs)
        del out
    return tracker.peak, max(held)
