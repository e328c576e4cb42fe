"""The graph view: parse a Graph (traced, loaded, or imported from ONNX) node by node.

    report = profile_graph(model, (x,), convention="flopcount")

Counting needs shapes only, so a graph on meta inputs is counted without allocating (a
175B-shaped decoder on a laptop). Latency, backward work and measured memory come from
running the graph's executor (``execution.py``), which is refused up front when the run's
predicted peak (liveness; a training step on shapes only) does not fit in the device's memory.
"""

from __future__ import annotations

from ..conventions import get as get_convention
from ..report.model import Memory, Report
from ..runtime.device import CPU
from ..runtime.graph import Graph, GraphModule, trace
from ..runtime.graph.passes import liveness
from ..runtime.graph.tree import tensor_leaves
from ..runtime.nn.modules.module import Module
from ..recording import memory as mem
from ..recording.params import bytes_by_dtype
from ..recording.state import preserved
from ..runtime.allocator import give_back_freed_memory
from . import execution
from ..recording.rows import NodeRows


def graph_of(model, args: tuple, kwargs: dict) -> Graph:
    """``model`` itself when it is a Graph, else the trace of ``model(*args, **kwargs)`` (a
    Module or any function of tensors)."""
    if isinstance(model, Graph):
        return model
    return trace(model, *args, **kwargs)


def _device(graph, args, kwargs):
    for t in tensor_leaves((args, kwargs)):
        return t.device
    return graph.device if graph.parameters else CPU


def _memory(graph, module) -> Memory:
    if module is not None:
        return Memory(parameters=bytes_by_dtype(module.parameters()), buffers=bytes_by_dtype(module.buffers()))
    params = [graph.tensors[n] for n, v in graph.parameters.items() if v.kind == "param"]
    buffers = [graph.tensors[n] for n, v in graph.parameters.items() if v.kind == "buffer"]
    return Memory(parameters=bytes_by_dtype(params), buffers=bytes_by_dtype(buffers))


def profile_graph(model, args: tuple = (), kwargs: dict | None = None, *, convention="flopcount",
                  latency: bool = False, backward: bool = False, warmup: int = 1, repeat: int = 5,
                  measure_memory: bool = False, name: str = "") -> Report:
    """Profile a Module (traced on ``args``) or a Graph: a :class:`Report` of nodes and scopes.

    >>> import flopcount.runtime as rt
    >>> report = profile_graph(rt.nn.Linear(3, 2), (rt.ones(4, 3),))
    >>> report.macs, report.flops, [r.type for r in report.rows]
    (24, 56, ['Linear', 'linear'])
    """
    kwargs = kwargs or {}
    conv = get_convention(convention)
    module = model if isinstance(model, Module) else None
    if module is not None:
        with preserved(module):
            module.train(backward)
            report = _profile(module, graph_of(module, args, kwargs), args, kwargs, conv, latency, backward,
                              warmup, repeat, measure_memory, name)
        return report
    return _profile(None, graph_of(model, args, kwargs), args, kwargs, conv, latency, backward, warmup, repeat,
                    measure_memory, name)


def _profile(module, graph, args, kwargs, conv, latency, backward, warmup, repeat, measure_memory, name) -> Report:
    if not args and not kwargs:
        args = tuple(_inputs_for(graph))
    device = _device(graph, args, kwargs)
    real = device.type != "meta"
    rows = NodeRows(graph, conv, module)
    memory = _memory(graph, module)
    memory.activations, memory.predicted_peak = _activations(graph)
    # one executable for every run below: each program it lowers is built once
    runnable = GraphModule(graph)
    if real and (latency or measure_memory or backward):
        # refused with the prediction, before anything runs for real
        peak = memory.predicted_peak
        if backward:
            peak = max(peak, execution.predict_training_peak(runnable, args, kwargs) or 0)
        mem.refuse_if_too_big(peak, device, name or graph.name, backward)
    if real and measure_memory:
        memory.measured_peak, memory.measured_activation_peak = execution.measure_peak(runnable, args, kwargs, device)

    node_ms = node_min = starts = libraries = None
    whole = (None, None)
    if latency and real:
        timed = execution.time_graph_and_nodes(runnable, args, kwargs, device, warmup, repeat)
        whole, node_ms, node_min, starts = timed["whole"], timed["median"], timed["min"], timed["start"]
        libraries = timed["library"]
    per_node_bwd = bwd_ms = None
    bwd_records = []
    backward_total_ms = None
    if backward:
        per_node_bwd, bwd_ms, bwd_records, step_memory = execution.run_backward(
            runnable, args, kwargs, conv, timing=latency and real, repeat=repeat,
            measure_on=device if real and measure_memory else None)
        memory.training_predicted_peak = step_memory["predicted"]
        if "measured" in step_memory:
            memory.training_measured_peak, memory.training_measured_activation_peak = step_memory["measured"]
        if latency and real:
            backward_total_ms = execution.time_backward_pass(runnable, args, kwargs, device, repeat)

    report_rows = rows.rows(node_ms, per_node_bwd, bwd_ms, node_min)
    records = rows.records(node_ms, starts, bwd_records, libraries)
    inputs = tensor_leaves((args, kwargs))
    params = [v for v in graph.parameters.values() if v.kind == "param"]
    # a floating parameter's dtype is the activations'; weights in a narrow or block format are not
    dtype = next((t.dtype.name for t in inputs if t.dtype.is_floating_point),
                 next((v.dtype.name for v in params if v.dtype.is_floating_point),
                      params[0].dtype.name if params else ""))
    return Report(report_rows, convention=conv.name, mode="graph", device=str(device), dtype=dtype,
                  input_shapes=[tuple(t.shape) for t in inputs], ops=records,
                  unsupported=rows.unsupported(node_ms), memory=memory, latency_ms=whole[0],
                  latency_min_ms=whole[1], backward=backward, backward_latency_ms=backward_total_ms,
                  model=name or graph.name)


def _activations(graph) -> tuple:
    """(bytes of every activation, their predicted peak): the liveness tables themselves are
    let go at once (a few hundred bytes per node of a huge graph, kept through the whole profile)."""
    live = liveness(graph)
    figures = sum(live.storage_bytes[o] for o in live.activations), live.peak_bytes
    del live
    give_back_freed_memory()  # its tables are large blocks the heap would keep
    return figures


def _inputs_for(graph) -> list:
    """Zero tensors matching the graph's inputs, on the parameters' device (counting only)."""
    from ..runtime.factories import zeros
    from ..runtime.graph.tree import unflatten

    dev = graph.device
    leaves = [zeros(*v.shape, dtype=v.dtype, device=dev) for v in graph.inputs]
    args, kw = unflatten(graph.input_tree, leaves)
    if kw:
        raise TypeError(f"graph {graph.name} takes keyword inputs {sorted(kw)}; pass them to profile()")
    return list(args)
