"""``flopcount compare``: two reports side by side (two models, or one model on two inputs).

The totals come first; then, for the modules both reports have (the same model at two input
sizes, or two members of one family), the MACs of each module side by side.
"""

from __future__ import annotations

import json

from ..report.units import bytes_to_string, flops_to_string, macs_to_string, params_to_string, time_to_string
from ..inputs import format_shape
from .render import rich_table, rich_text, rows_text


def label(report) -> str:
    """``resnet50 (1x3x224x224)``: what one side of the comparison is."""
    shapes = ", ".join(format_shape(s) for s in report.input_shapes)
    return f"{report.model} ({shapes})" if shapes else report.model


def ratio(a, b) -> str:
    """B / A as ``4.00x`` (``-`` when either is missing or A is 0)."""
    if a is None or b is None or a == 0:
        return "-"
    return f"{b / a:.2f}x"


def _metrics(report) -> list:
    """(name, raw value, human text) of the totals a comparison shows."""
    t = report.totals
    out = [("MACs", t["macs"], macs_to_string(t["macs"])),
           ("FLOPs", t["flops"], flops_to_string(t["flops"])),
           ("Params", t["params"], params_to_string(t["params"])),
           ("Bytes read + written", t["bytes_read"] + t["bytes_written"],
            bytes_to_string(t["bytes_read"] + t["bytes_written"]))]
    peak = report.memory.predicted_peak
    out.append(("Peak activations", peak, "-" if peak is None else bytes_to_string(peak)))
    if report.backward:
        out.append(("Training step MACs", t["training_macs"], macs_to_string(t["training_macs"])))
    if report.latency_ms is not None:
        out.append(("Latency (ms)", report.latency_ms, time_to_string(report.latency_ms)))
    if report.hardware is not None:
        out.append((f"Roofline ({report.hardware.name})", t["roofline_ms"],
                    f"{time_to_string(t['roofline_ms'])}, {t['roofline_bound'] or '-'}-bound"))
    return out


def totals_rows(a, b) -> list:
    """[metric, A, B, B/A] for the totals both reports have."""
    mb = {name: (raw, text) for name, raw, text in _metrics(b)}
    return [[name, text, mb[name][1], ratio(raw, mb[name][0])] for name, raw, text in _metrics(a) if name in mb]


def module_rows(a, b, depth: int) -> list:
    """[module, MACs A, MACs B, B/A] for the rows down to ``depth`` that both reports have."""
    out = []
    for row in a.rows:
        if row.name == "" or row.depth > depth or row.kind == "op" or row.name not in b:
            continue
        other = b.row(row.name)
        out.append([row.name, macs_to_string(row.macs), macs_to_string(other.macs), ratio(row.macs, other.macs)])
    return out


def to_dict(a, b) -> dict:
    """JSON of a comparison: each side's summary and the B/A ratio of each total."""

    def side(r) -> dict:
        return {"model": r.model, "input_shapes": [list(s) for s in r.input_shapes], "convention": r.convention,
                "mode": r.mode, "device": r.device, "totals": r.totals, "memory": r.memory.to_dict()}

    ta, tb = a.totals, b.totals
    ratios = {k: raw_ratio(ta[k], tb[k]) for k in ("macs", "flops", "params", "bytes_read", "bytes_written",
                                                  "latency_ms")}
    return {"schema_version": 1, "a": side(a), "b": side(b), "ratio_b_over_a": ratios}


def render(a, b, fmt: str, depth: int = 1):
    """The comparison as text in ``fmt``, or (for the terminal) a rich renderable when fmt is
    ``rich``."""
    headers = ["", f"A: {label(a)}", f"B: {label(b)}", "B / A"]
    footer = [f"convention: {a.convention} | mode: {a.mode} | device: {a.device}"
              + ("" if (b.convention, b.mode, b.device) == (a.convention, a.mode, a.device)
                 else f" (B: {b.convention} | {b.mode} | {b.device})")]
    totals = totals_rows(a, b)
    modules = module_rows(a, b, depth)
    if fmt == "json":
        return json.dumps(to_dict(a, b), indent=2) + "\n"
    if fmt == "csv":
        return rows_text(["metric", "a", "b", "b_over_a"], raw_rows(a, b), "csv")
    if fmt == "markdown":
        text = rows_text(headers, totals, "markdown", footer=footer)
        if modules:
            text += "\n" + rows_text(["Module", "A MACs", "B MACs", "B / A"], modules, "markdown")
        return text
    from rich.console import Group

    parts = [rich_table(headers, totals, title="flopcount compare", footer=footer)]
    if modules:
        parts.append(rich_table(["Module", "A MACs", "B MACs", "B / A"], modules))
    group = Group(*parts)
    return group if fmt == "rich" else rich_text(group)


def raw_rows(a, b) -> list:
    """[metric, A, B, B/A] with raw numbers (the CSV form)."""
    mb = {name: raw for name, raw, _ in _metrics(b)}
    return [[name, raw, mb[name], raw_ratio(raw, mb[name])] for name, raw, _ in _metrics(a) if name in mb]


def raw_ratio(a, b):
    return b / a if a and b is not None else None


__all__ = ["render", "to_dict", "totals_rows", "module_rows", "raw_rows", "label", "ratio", "raw_ratio"]
