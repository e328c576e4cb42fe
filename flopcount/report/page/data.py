"""What the page embeds: a report (or a diff, or an LLM phase's or a training plan's document)
as plain JSON values, its rows and ops packed in columns (:mod:`.columns`). The numbers are the
JSON report's own (``Report.to_dict``); nothing here computes a cost."""

from __future__ import annotations

from ...runtime.errors import FlopcountError
from .columns import pack

ROW_FIELDS = ["name", "type", "depth", "parent", "kind", "counted_by", "params", "params_own", "macs", "flops",
              "bytes_read", "bytes_written", "output_bytes", "input_shapes", "output_shapes", "calls",
              "latency_ms", "flops_per_second", "backward_macs", "backward_flops", "backward_latency_ms",
              "roofline_ms", "bound", "roofline_fraction"]
OP_FIELDS = ["name", "op", "scope", "phase", "counted", "macs", "flops", "bytes_read", "bytes_written", "params",
             "param_bytes", "input_shapes", "input_dtypes", "output_shapes", "output_dtypes", "latency_ms",
             "start_ms", "source", "roofline_ms", "bound", "mac_dtype", "inputs", "outputs", "attrs"]
META_FIELDS = ["schema_version", "model", "convention", "mode", "device", "engine", "dtype", "input_shapes",
               "totals", "memory", "warnings", "notes", "unsupported"]


def _rows(doc: dict) -> dict:
    """The rows, each parent as the index of its row (-1 for the root)."""
    index = {r["name"]: i for i, r in enumerate(doc["rows"])}
    if doc["rows"]:
        index[""] = 0   # the root's own name is the model's; its children's parent is ''
    rows = [dict(r, parent=-1 if r["parent"] is None else index.get(r["parent"], 0)) for r in doc["rows"]]
    if rows:
        rows[0]["parent"] = -1
    return pack(rows, ROW_FIELDS)


def _hardware(report, doc: dict) -> dict | None:
    """The profile, with the matrix roof of the dtype most of the MACs run in."""
    if report.hardware is None:
        return None
    by_dtype = doc["totals"].get("macs_by_dtype") or report.root.macs_by_dtype or {}
    dtype = max(by_dtype, key=by_dtype.get) if by_dtype else (report.dtype or "float32")
    try:
        matrix = report.hardware.peak(dtype)
    except (KeyError, TypeError, ValueError):
        matrix = report.hardware.vector_flops
    return dict(doc["hardware"], dtype=dtype, matrix_flops=matrix)


def timeline(report) -> dict | None:
    """The Chrome trace's slices (``report.chrome_trace()``), each op slice joined to its op
    record by index; None when the report has no measured times."""
    if report.latency_ms is None or not any(o.latency_ms is not None for o in report.ops):
        return None
    index = {id(o): i for i, o in enumerate(report.ops)}
    by_phase = {phase: [o for o in report.ops if o.phase == phase and o.latency_ms is not None]
                for phase in ("forward", "backward")}
    slices = []
    for event in report.chrome_trace()["traceEvents"]:
        if event.get("ph") != "X":
            continue
        node = event["cat"] == "Node"
        args = event.get("args", {})
        op = index[id(by_phase[args["phase"]][int(args["node_index"])])] if node else -1
        slices.append({"name": report.ops[op].name if node else event["name"], "op": op,
                       "thread": "forward" if event["tid"] == 1 else "backward",
                       "ts": event["ts"], "dur": event["dur"]})
    return pack(slices, ["name", "op", "thread", "ts", "dur"])


def report_data(report, timeline_wanted: bool | None = None) -> dict:
    """The page's data for one report. ``timeline_wanted``: None draws a timeline when the
    report was timed, True insists on one (an error without measured times), False leaves it out."""
    doc = report.to_dict()
    slices = None if timeline_wanted is False else timeline(report)
    if timeline_wanted and slices is None:
        raise FlopcountError("a timeline needs measured times: profile with --latency (latency=True); this report "
                             "has none")
    meta = {k: doc.get(k) for k in META_FIELDS}
    meta.update(backward=report.backward, latency_ms=report.latency_ms,
                backward_latency_ms=report.backward_latency_ms, rows=len(doc["rows"]), ops=len(doc["ops"]))
    return {"kind": "report", "meta": meta, "rows": _rows(doc), "ops": pack(doc["ops"], OP_FIELDS),
            "hardware": _hardware(report, doc), "timeline": slices}


def diff_data(diff) -> dict:
    """Two reports' trees and the diff's matched rows."""
    doc = diff.to_dict()
    side = lambda r: {"meta": {"model": r.model or r.root.type, "latency_ms": r.latency_ms}, "rows": _rows(r.to_dict())}
    fields = list(doc["rows"][0]) if doc["rows"] else ["status"]
    return {"kind": "diff", "a": side(diff.a), "b": side(diff.b),
            "diff": {k: doc[k] for k in ("by", "a", "b", "totals", "counts")}, "matches": pack(doc["rows"], fields)}


def document_data(what: str, doc: dict) -> dict:
    """An LLM phase's or a training plan's document (``to_dict()``), drawn as tabs of tables."""
    return {"kind": "document", "what": what, "doc": doc}


__all__ = ["report_data", "diff_data", "document_data", "timeline"]
