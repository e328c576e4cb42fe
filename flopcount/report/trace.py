"""Chrome trace (chrome://tracing, Perfetto): a timeline of one forward (and backward) pass.

Each op is a slice of its measured time (the median over the timed runs), laid one after
another in execution order, as the ops ran; the modules are slices over their ops, nested by
scope (``layer1`` over ``layer1.0`` over ``layer1.0.conv1`` over its ``conv``), so every slice
lies inside its parent's. The forward pass is one thread, the backward pass another, after it;
process and threads are named. A report without measured times is laid out by the ops'
roofline estimates when it has a hardware profile (the trace says so in ``otherData``), and
refused otherwise: a timeline of zeros shows nothing.

Op events use onnxruntime's profiler names so both traces can be joined on ``args.op_name`` and
the node name: ``"cat": "Node"``, ``"name": "<node>_kernel_time"``, where ``<node>`` is the ONNX
node's own name for a graph imported from ONNX (every runtime op a node became carries it) and
the report's op name otherwise, ``"ph": "X"``, ``"ts"`` and ``"dur"`` in microseconds, and in
``args``: ``op_name``, ``provider``, ``node_index``, ``input_type_shape`` /
``output_type_shape`` (``[{"float": [1, 3, 224, 224]}]``), ``output_size``,
``parameter_size``, ``activation_size`` (strings, as onnxruntime writes them). flopcount's own
numbers sit next to them: ``macs``, ``flops``, ``scope``, ``phase``. Module events have
``"cat": "Module"``, the module path as ``name`` and its type, MACs, FLOPs and parameters in
``args``.
"""

from __future__ import annotations

import os

from ..runtime.errors import FlopcountError
from .sums import scope_prefixes

# onnxruntime's element type names for the dtypes the runtime has
_ORT_TYPES = {"float32": "float", "float64": "double", "float16": "float16", "int64": "int64",
              "int32": "int32", "int16": "int16", "int8": "int8", "uint8": "uint8", "bool": "bool"}
_PROVIDERS = {"cpu": "CPUExecutionProvider", "cuda": "CUDAExecutionProvider", "meta": "MetaExecutionProvider"}
_THREADS = {"forward": 1, "backward": 2}


def _type_shape(shapes, dtypes) -> list:
    """[{onnxruntime's type name: shape}] per present input or output (None: an absent optional one)."""
    return [{_ORT_TYPES.get(dtype, dtype or "float"): list(shape)} for shape, dtype in zip(shapes, dtypes)
            if shape is not None]


def _clock(report) -> tuple:
    """(the op time to lay events out by, a sentence saying what it is)."""
    if report.latency_ms is not None and any(o.latency_ms is not None for o in report.ops):
        return "latency_ms", "measured: each op's median time, laid end to end in execution order"
    if report.hardware is not None:
        return "roofline_ms", (f"not measured: each op's roofline estimate on {report.hardware.title}, "
                               f"laid end to end in execution order")
    raise FlopcountError("a trace needs times: profile with latency=True (--latency), or on a hardware profile "
                         "(hardware=NAME, --hardware NAME) to lay the ops out by their roofline estimate")


def _op_event(report, rec, index: int, provider: str, pid: int, start_ns: int, dur_ns: int) -> dict:
    return {
        "cat": "Node", "pid": pid, "tid": _THREADS[rec.phase], "ph": "X",
        "ts": start_ns / 1e3, "dur": dur_ns / 1e3,
        "name": f"{rec.source or rec.name}_kernel_time",
        "args": {
            "op_name": rec.op,
            "provider": provider,
            "node_index": str(index),
            "input_type_shape": _type_shape(rec.input_shapes, rec.input_dtypes),
            "output_type_shape": _type_shape(rec.output_shapes, rec.output_dtypes),
            "output_size": str(rec.bytes_written),
            "parameter_size": str(rec.param_bytes),
            "activation_size": str(max(0, rec.bytes_read - rec.param_bytes)),
            "scope": rec.scope,
            "phase": rec.phase,
            "macs": rec.macs,
            "flops": rec.flops,
            "counted": rec.counted,
        },
    }


class _Modules:
    """Open module slices of one thread: entered and left as consecutive ops change scope."""

    def __init__(self, report, pid: int, tid: int, events: list):
        self.report, self.pid, self.tid, self.events = report, pid, tid, events
        self.open: list = []   # [(path, start_ns)]

    def move_to(self, scope: str, now_ns: int) -> None:
        chain = scope_prefixes(scope)[1:]   # the model's row ('') is the thread itself
        keep = 0
        while keep < min(len(chain), len(self.open)) and self.open[keep][0] == chain[keep]:
            keep += 1
        self.close(keep, now_ns)
        self.open += [(path, now_ns) for path in chain[keep:]]

    def close(self, keep: int, now_ns: int) -> None:
        while len(self.open) > keep:
            path, start = self.open.pop()
            row = self.report.row(path) if path in self.report else None
            args = {"module": path}
            if row is not None:
                args.update(type=row.type, macs=row.macs, flops=row.flops, params=row.params)
            self.events.append({"cat": "Module", "pid": self.pid, "tid": self.tid, "ph": "X",
                                "ts": start / 1e3, "dur": (now_ns - start) / 1e3, "name": path, "args": args})


def chrome_trace(report) -> dict:
    """``{"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}``: op slices over
    module slices, forward then backward (see the module docstring); a ``FlopcountError`` when
    the report has neither measured times nor a hardware profile to estimate them."""
    clock, how = _clock(report)
    provider = _PROVIDERS.get(report.device.split(":")[0], report.device)
    pid = os.getpid()
    label = report.model or report.root.type
    events = [{"ph": "M", "pid": pid, "tid": 0, "name": "process_name",
               "args": {"name": f"flopcount: {label} ({report.mode}, {report.device})"}}]
    now_ns = 0  # integer nanoseconds: a child's end never rounds past its parent's
    for phase, tid in _THREADS.items():
        records = [r for r in report.ops if r.phase == phase and getattr(r, clock) is not None]
        if not records:
            continue
        events.append({"ph": "M", "pid": pid, "tid": tid, "name": "thread_name", "args": {"name": phase}})
        events.append({"ph": "M", "pid": pid, "tid": tid, "name": "thread_sort_index", "args": {"sort_index": tid}})
        modules = _Modules(report, pid, tid, events)
        for index, rec in enumerate(records):
            modules.move_to(rec.scope, now_ns)
            dur_ns = round(getattr(rec, clock) * 1e6)
            events.append(_op_event(report, rec, index, provider, pid, now_ns, dur_ns))
            now_ns += dur_ns
        modules.close(0, now_ns)
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"model": label, "times": how, "convention": report.convention}}
