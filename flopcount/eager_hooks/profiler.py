"""The eager view: run the model once with hooks and an observer, then price what happened.

    report = profile_eager(model, (x,), convention="ptflops")

One counting run records every module call and op (``recording/recorder.py``); pricing happens after the
run (``analysis.py``), so the hooks cost little. What both views share (the op recorder,
parameter index, memory prediction, the training step) is in ``flopcount/recording``. With ``latency=True`` separate timed runs
follow (``timing.py``); on a real device the activation peak is also measured
(``recording/memory.py``). Before anything runs for real for latency, measured memory or a
training step, the step runs on shapes only and is refused when its predicted peak does not
fit in the device's memory. The model's flags and gradients are put back afterwards (``state.py``).
"""

from __future__ import annotations

from ..report.model import Memory, Report
from ..runtime.device import backend
from ..runtime.dispatch import no_grad, observe
from ..runtime.graph.tree import flatten, tensor_leaves
from ..runtime.nn.modules.module import Module
from ..conventions import get as get_convention
from ..recording import memory as mem
from ..recording.capture import captured_graph
from ..recording.params import ModelIndex, bytes_by_dtype
from ..recording.recorder import Recorder
from ..recording.steps import training_step
from ..recording.timing import median_min, time_backward, time_calls, time_ops
from . import analysis
from .timing import time_modules
from ..recording.state import preserved


def run_step(model, args, kwargs, backward: bool, clock=None):
    """One forward (inference: no grad) or forward + backward (seeded with ones; ``clock``
    around the backward pass: ``training_step``)."""
    if not backward:
        with no_grad():
            return model(*args, **kwargs)
    return training_step(lambda: model(*args, **kwargs), model.parameters(), clock)


def _set_training(model, index, mode: bool) -> None:
    """``model.train(mode)``; Module's own ``train`` sets every module's flag, which the index
    already lists (no walk of the tree again)."""
    if type(model).train is not Module.train:
        model.train(mode)
        return
    for _, m in index.modules:
        m.__dict__["training"] = mode


def _device_of(model, args) -> object:
    for t in tensor_leaves(list(args)):
        return t.device
    for p in model.parameters():
        return p.device
    from ..runtime.device import CPU

    return CPU


def _dtype_of(model, args) -> str:
    for t in tensor_leaves(list(args)):
        if t.dtype.is_floating_point:
            return t.dtype.name
    params = list(model.parameters())
    # a floating parameter's dtype is the activations'; weights in a narrow or block format are not
    return next((p.dtype.name for p in params if p.dtype.is_floating_point),
                params[0].dtype.name if params else "")


def profile_eager(model, args: tuple, kwargs: dict | None = None, *, convention="flopcount",
                  latency: bool = False, backward: bool = False, warmup: int = 1, repeat: int = 5,
                  measure_memory: bool = False, name: str = "") -> Report:
    """Profile ``model(*args, **kwargs)`` with module hooks: a :class:`Report` of modules.

    >>> import flopcount.runtime as rt
    >>> report = profile_eager(rt.nn.Linear(3, 2), (rt.ones(4, 3),))
    >>> report.macs, report.flops, report.params
    (24, 56, 8)
    """
    kwargs = kwargs or {}
    conv = get_convention(convention)
    device = _device_of(model, args)
    real = device.type != "meta"
    step = lambda: run_step(model, args, kwargs, backward)  # noqa: E731
    index = ModelIndex(model)
    with preserved(model, index):
        _set_training(model, index, backward)
        leaves = tensor_leaves((list(args), kwargs))
        if real and (latency or measure_memory or backward):
            # refused with the prediction (a run on shapes only), before the real run allocates it
            peak = mem.predict_before_running(step, Recorder(model, leaves, index=index), backward)
            mem.refuse_if_too_big(peak, device, name or type(model).__name__, backward)
        recorder = Recorder(model, leaves, index=index)
        with recorder.attached():
            out = step()
        # what the graph view's trace refuses (a generator), this view refuses with the same line
        outputs = flatten(out, what="output")[0]
        output_ids = [recorder.serial(t) for t in outputs]
        graph = captured_graph(recorder, model, outputs, name)
        del outputs
        priced = analysis.Priced(recorder, conv)
        events = recorder.events

        memory = Memory(parameters=bytes_by_dtype(index.params), buffers=bytes_by_dtype(index.buffers))
        memory.activations = sum(own.bytes_written for e, own in zip(events, priced.own_cost)
                                 if e.phase == "forward")
        holds = mem.call_holds(recorder.calls)
        memory.predicted_peak = mem.predicted_peak(events, output_ids, holds)
        if backward:
            memory.training_predicted_peak = mem.predicted_training_peak(events, output_ids, holds)
        del out
        if real and measure_memory:
            memory.measured_peak, memory.measured_activation_peak = _measure(model, args, kwargs, device, False)
            if backward:
                memory.training_measured_peak, memory.training_measured_activation_peak = \
                    _measure(model, args, kwargs, device, True)

        module_times = op_latency = op_start = None
        whole = (None, None)
        backward_ms = None
        backward_rows = None
        if latency and real:
            forward = lambda: run_step(model, args, kwargs, False)  # noqa: E731
            whole = median_min(time_calls(forward, device, warmup, repeat))
            module_times = time_modules(model, forward, device, repeat)
            op_latency, op_start = _op_timings(step, events, repeat)
            if backward:
                backward_ms = median_min(time_backward(lambda clock: run_step(model, args, kwargs, True, clock),
                                                       device, 0, repeat))[0]
                backward_rows = _backward_by_module(events, op_latency)

    rows = analysis.build_rows(model, priced, graph, module_times, backward_rows, index.modules)
    unsupported = analysis.unsupported(priced, module_times, whole[0], op_latency)
    return Report(rows, convention=conv.name, mode="eager", device=str(device), dtype=_dtype_of(model, args),
                  input_shapes=[tuple(t.shape) for t in tensor_leaves(list(args))],
                  op_lists=analysis.op_records(priced, op_latency, op_start),
                  unsupported=unsupported, memory=memory, latency_ms=whole[0],
                  latency_min_ms=whole[1], backward=backward, backward_latency_ms=backward_ms,
                  model=name or type(model).__name__)


class _Sampler:
    """Observer reading the tracker after every op: the bytes held between ops."""

    def __init__(self, tracker):
        self.tracker = tracker
        self.held = 0

    def on_op(self, event) -> None:
        self.held = max(self.held, self.tracker.current())


def _measure(model, args, kwargs, device, backward: bool) -> tuple:
    """(peak bytes the backend allocated during one step, the most bytes held between two
    ops). The first includes each kernel's temporaries (im2col buffers...), the second is what
    liveness predicts. The step's output is included in both."""
    be = backend(device)
    with be.track_memory() as tracker:
        sampler = _Sampler(tracker)
        with observe(sampler):
            out = run_step(model, args, kwargs, backward)
        del out
    if backward:
        for p in model.parameters():
            p.grad = None
    return tracker.peak, sampler.held


def _op_timings(step, events, repeat: int) -> tuple:
    """Per-event median latency (ms) and start offset, matched to the counting run's events."""
    medians, starts = time_ops(step, repeat)
    if medians is None or len(medians) != len(events):
        return None, None
    return medians, starts


def _backward_by_module(events, op_latency) -> dict | None:
    """Backward latency per module path, rolled up to every ancestor."""
    if op_latency is None:
        return None
    out: dict = {}
    for e, ms in zip(events, op_latency):
        if e.phase != "backward" or ms is None:
            continue
        path = e.path
        while True:
            out[path] = out.get(path, 0.0) + ms
            if path == "":
                break
            path = path.rpartition(".")[0]
    return out
