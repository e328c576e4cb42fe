"""Chrome trace (chrome://tracing, Perfetto) of the per-op records.

Events use onnxruntime's profiler names so both traces can be joined on ``args.op_name`` and
the node name: ``"cat": "Node"``, ``"name": "<node>_kernel_time"``, where ``<node>`` is the ONNX
node's own name for a graph imported from ONNX (every runtime op a node became carries it) and
the report's op name otherwise, ``"ph": "X"``, ``"ts"`` and
``"dur"`` in microseconds, and in ``args``: ``op_name``, ``provider``, ``node_index``,
``input_type_shape`` / ``output_type_shape`` (``[{"float": [1, 3, 224, 224]}]``),
``output_size``, ``parameter_size``, ``activation_size`` (strings, as onnxruntime writes them).
flopcount's own numbers sit next to them: ``macs``, ``flops``, ``scope``, ``phase``.
"""

from __future__ import annotations

import os

# onnxruntime's element type names for the dtypes the runtime has
_ORT_TYPES = {"float32": "float", "float64": "double", "float16": "float16", "int64": "int64",
              "int32": "int32", "int16": "int16", "int8": "int8", "uint8": "uint8", "bool": "bool"}
_PROVIDERS = {"cpu": "CPUExecutionProvider", "cuda": "CUDAExecutionProvider", "meta": "MetaExecutionProvider"}


def _type_shape(shapes, dtypes) -> list:
    out = []
    for shape, dtype in zip(shapes, dtypes):
        if shape is None:
            continue
        out.append({_ORT_TYPES.get(dtype, dtype or "float"): list(shape)})
    return out


def chrome_trace(report) -> dict:
    """``{"traceEvents": [...], "displayTimeUnit": "ms"}``; ops without a measured time are
    laid end to end with zero duration, so the trace still lists every op in order."""
    provider = _PROVIDERS.get(report.device.split(":")[0], report.device)
    pid = os.getpid()
    events = []
    clock = 0.0
    for index, rec in enumerate(report.ops):
        dur_us = (rec.latency_ms or 0.0) * 1e3
        ts_us = rec.start_ms * 1e3 if rec.start_ms is not None else clock
        clock = max(clock, ts_us + dur_us)
        out_size = rec.bytes_written
        events.append({
            "cat": "Node",
            "pid": pid,
            "tid": 1 if rec.phase == "forward" else 2,
            "dur": round(dur_us, 3),
            "ts": round(ts_us, 3),
            "ph": "X",
            "name": f"{rec.source or rec.name}_kernel_time",
            "args": {
                "op_name": rec.op,
                "provider": provider,
                "node_index": str(index),
                "input_type_shape": _type_shape(rec.input_shapes, rec.input_dtypes),
                "output_type_shape": _type_shape(rec.output_shapes, rec.output_dtypes),
                "output_size": str(out_size),
                "parameter_size": str(rec.param_bytes),
                "activation_size": str(max(0, rec.bytes_read - rec.param_bytes)),
                "scope": rec.scope,
                "phase": rec.phase,
                "macs": rec.macs,
                "flops": rec.flops,
                "counted": rec.counted,
            },
        })
    return {"traceEvents": events, "displayTimeUnit": "ms"}
