"""Machine-readable renderers: JSON and CSV (raw integers, no human units).

JSON schema (``schema_version`` 1; keys are stable, new keys may be added, none renamed)::

    {
      "schema_version": 1,
      "model": str,                      # zoo name, file or model class
      "convention": "flopcount" | "ptflops",
      "mode": "eager" | "graph",
      "device": str, "engine": "flopcount" | "torch" | "onnxruntime", "dtype": str,
      "input_shapes": [[int, ...], ...],
      "totals": {
        "macs": int, "flops": int, "params": int,
        "macs_by_dtype": {dtype: int},    # the MACs split by the dtype they run in
        "trainable_params": int, "frozen_params": int,
        "bytes_read": int, "bytes_written": int,
        "latency_ms": float | null, "latency_min_ms": float | null,
        "seen_not_counted_macs": int, "seen_not_counted_flops": int,
        # with backward=True also:
        "backward_macs": int, "backward_flops": int, "backward_latency_ms": float | null,
        "training_macs": int, "training_flops": int,
        # with a hardware profile (profile(hardware=...)) also:
        "roofline_ms": float, "roofline_bound": "compute" | "memory" | null,
        "roofline_fraction": float | null,  # roofline_ms / latency_ms, when timed
        "predicted_ms": float | null, "predicted_error": float | null,  # a calibrated profile's prediction
        "memory_needed_bytes": int,         # parameters + buffers + predicted activation peak
        "fits_memory": bool                 # memory_needed_bytes <= the device's memory
      },
      "memory": {"parameters": {dtype: bytes}, "buffers": {dtype: bytes},
                 "parameter_bytes": int, "buffer_bytes": int, "activations": int,
                 "predicted_peak": int | null, "measured_peak": int | null,
                 "measured_activation_peak": int | null,
                 "training_predicted_peak": int | null, "training_measured_peak": int | null,
                 "training_measured_activation_peak": int | null},
      "rows": [                          # tree order, root first: named after the model
                                         # (report.model), its children's parent that name
        {"name": str, "type": str, "depth": int, "parent": str | null,
         "kind": "module" | "scope" | "op", "counted_by": "rule" | "ops" | "covered" | "unsupported",
         "macs": int, "flops": int, "params": int, "params_own": int,
         "trainable_params": int, "frozen_params": int,
         "bytes_read": int, "bytes_written": int, "output_bytes": int, "intensity": float | null,
         "calls": int, "latency_ms": float | null, "latency_min_ms": float | null,
         "flops_per_second": float | null,  # achieved: flops over the measured latency
         "backward_macs": int, "backward_flops": int, "backward_latency_ms": float | null,
         "functional_macs": int, "functional_flops": int,
         "input_shapes": [[int, ...] | null], "output_shapes": [[int, ...]],
         "roofline_ms": float | null, "bound": "compute" | "memory" | null,   # with hardware
         "roofline_fraction": float | null}
      ],
      "ops": [                           # execution order; forward then backward
        {"name": str, "op": str, "scope": str, "phase": "forward" | "backward",
         "macs": int, "flops": int, "bytes_read": int, "bytes_written": int,
         "params": int, "param_bytes": int, "input_shapes": [[int, ...] | null], "input_dtypes": [str | null],
         "output_shapes": [[int, ...]], "output_dtypes": [str],
         "counted": bool, "latency_ms": float | null, "start_ms": float | null,
         "source": str,                  # the ONNX or torch.export node it came from ("" if traced)
         "roofline_ms": float | null, "bound": "compute" | "memory" | null,   # with hardware
         "roofline_fraction": float | null, "mac_dtype": str | null,
         # the op graph (graph view; empty for eager ops): the values read and made, by name
         # (an edge joins the op that makes a value to every op that reads it), and the attrs
         "inputs": [str | null], "outputs": [str], "attrs": {str: JSON value},
         "library": str}               # on a GPU only (graph view: when timed): "cuBLAS", "own kernel", both, "CuPy"
      ],
      "by_op_type": [{"op": str, "calls": int, "macs": int, "flops": int, "bytes_read": int,
                      "bytes_written": int, "counted_calls": int, "latency_ms": float | null,
                      "roofline_ms": float | null}],   # with hardware: the sum over its calls
      "unsupported": [{"kind": "module" | "op", "name": str, "calls": int,
                       "latency_share": float | null}],
      "seen_not_counted": [ op records as in "ops" ],
      "folded": [ op records as in "ops" ],  # eager: computed from constants only
      "threads": {"threads": int, "cores": int, "busy_cores": float | null, "chosen": bool,
                  "clock": "thread CPU time" | "wall time"} | null,
                                         # a timed CPU run's threads: chosen from the cores free
                                         # (busy_cores: those other work kept busy) or given
      "notes": [str],                    # how the model was loaded or captured
      "warnings": [str],                 # spread-out timings, training-mode counts
      "engine_nodes": [{"name", "op_type", "provider", "latency_ms", "sources": [str], "macs",
                        "flops", "bytes_read", "bytes_written", "flops_per_second",
                        "bytes_per_second"}],  # engine "onnxruntime" only (else [])
      "hardware": {"name", "title", "peak_flops": {dtype: float}, "vector_flops", "memory_bandwidth",
                   "memory_bytes", ...} | null   # the profile the rooflines were priced on
    }
"""

from __future__ import annotations

import csv
import io
import json

SCHEMA_VERSION = 1

ROW_COLUMNS = ("name", "type", "depth", "parent", "kind", "counted_by", "macs", "flops", "params",
               "params_own", "trainable_params", "frozen_params", "bytes_read", "bytes_written",
               "output_bytes", "intensity", "calls", "latency_ms", "latency_min_ms", "flops_per_second", "backward_macs",
               "backward_flops", "backward_latency_ms", "functional_macs", "functional_flops",
               "input_shapes", "output_shapes")
OP_COLUMNS = ("name", "op", "scope", "phase", "macs", "flops", "bytes_read", "bytes_written", "params",
              "param_bytes", "input_shapes", "output_shapes", "counted", "latency_ms", "start_ms", "source")

ROOFLINE_COLUMNS = ("roofline_ms", "bound", "roofline_fraction")  # appended with a hardware profile


def to_dict(report) -> dict:
    """The report as plain Python data with the schema above."""
    return {
        "schema_version": SCHEMA_VERSION,
        "model": report.model or report.root.type,
        "convention": report.convention,
        "mode": report.mode,
        "device": report.device,
        "engine": report.engine,
        "dtype": report.dtype,
        "input_shapes": [list(s) for s in report.input_shapes],
        "totals": report.totals,
        "memory": report.memory.to_dict(),
        "rows": row_dicts(report),
        "ops": [o.to_dict() for o in report.ops],
        "by_op_type": [s.to_dict() for s in report.by_op_type(phase="forward")],
        "unsupported": [{"kind": u.kind, "name": u.name, "calls": u.calls, "latency_share": u.latency_share,
                         "nodes": list(u.nodes)} for u in report.unsupported],
        "seen_not_counted": [o.to_dict() for o in report.seen_not_counted],
        "folded": [o.to_dict() for o in report.folded],
        "threads": report.threads.to_dict() if report.threads is not None else None,
        "notes": list(report.notes),
        "warnings": report.warnings,
        # engine "onnxruntime": its optimized graph's nodes, timed, with the counts joined to them
        "engine_nodes": [n.to_dict() for n in report.engine_nodes],
        "hardware": None if report.hardware is None else report.hardware.to_dict(),
    }


def row_dicts(report) -> list:
    """Each row as a dict, the root named after the model rather than '' (a name a reader of
    the file can recognize), and its children's ``parent`` with it."""
    label = report.model or report.root.type
    out = []
    for row in report.rows:
        d = row.to_dict()
        if row.name == "":
            d["name"] = label
        if row.parent == "":
            d["parent"] = label
        out.append(d)
    return out


def to_json(report, indent: int | None = 2) -> str:
    return json.dumps(to_dict(report), indent=indent)


def _cell(value):
    if isinstance(value, (list, tuple)):
        # shapes: 1x3x224x224 joined by ';', an absent optional input (a conv's bias) as '-'
        return ";".join("-" if s is None else "x".join(str(d) for d in s) if isinstance(s, (list, tuple))
                        else str(s) for s in value)
    return "" if value is None else value


def to_csv(report, by: str = "module") -> str:
    """A header line, then one line per row (``by="op"``: one per op record). Shapes are
    written as ``1x3x224x224`` joined by ``;`` (``-`` for an absent optional input)."""
    if by not in ("module", "op"):
        raise ValueError(f"CSV is written by 'module' or 'op', not {by!r}")
    columns, items = (ROW_COLUMNS, row_dicts(report)) if by == "module" else (
        OP_COLUMNS, [o.to_dict() for o in report.ops])
    if report.hardware is not None:
        columns += ROOFLINE_COLUMNS
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    for d in items:
        writer.writerow([_cell(d[c]) for c in columns])
    return buffer.getvalue()
