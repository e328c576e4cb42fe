"""Pictures of a report with matplotlib: per-layer bars and a roofline chart of every op.

``report.plot()`` returns a matplotlib ``Figure`` (a notebook shows it inline);
``report.plot(path="cost.svg")`` also writes it (svg, png or pdf, by the extension).

* ``kind="layers"``: one panel each of MACs, parameters and (when timed) latency, a horizontal
  bar per layer of the module tree at ``depth`` (or the ``top`` most expensive layers).
* ``kind="roofline"``: every forward op at its arithmetic intensity (FLOPs per byte moved)
  against its FLOP/s: achieved (FLOPs over the measured time) when timed, else the roofline
  estimate; under the roofs of the report's hardware profile (``profile(hardware=...)``), or
  of this CPU measured (``hardware.get("cpu")``) when the report has none.
* ``kind="overview"`` (the default): both, the bars above the roofline.
* ``kind="prediction"``: with a calibrated profile and measured times, every forward op's
  predicted time against its measured time (and its roofline time), on log axes around the
  diagonal where prediction equals measurement.

    >>> import flopcount
    >>> figure = flopcount.profile("resnet18").plot(kind="layers")   # doctest: +SKIP
    >>> figure.savefig("resnet18.png")                                # doctest: +SKIP
"""

from __future__ import annotations

import io
import os

from .. import hardware as hw
from ..io_utils import atomic_write
from ..runtime.errors import FlopcountError
from .units import flops_to_string, macs_to_string, params_to_string, time_to_string
from .views import tree_rows

KINDS = ("overview", "layers", "roofline", "prediction")
FORMATS = (".svg", ".png", ".pdf")
BAR_COLORS = {"MACs": "#4C72B0", "Params": "#55A868", "Latency": "#C44E52"}
MAX_OP_COLORS = 8  # the most frequent op types get a color each, the rest are grey


def _matplotlib():
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise FlopcountError("plots need matplotlib: pip install matplotlib") from None
    return Figure


def check_path(path: str) -> None:
    """A file a plot can be written to: by extension svg, png or pdf."""
    if os.path.splitext(str(path))[1].lower() not in FORMATS:
        raise FlopcountError(f"plot {path}: the file name must end in {', '.join(FORMATS)}")


def plot(report, kind: str = "overview", depth: int = 1, top: int | None = None, hardware=None,
         path: str | None = None):
    """The report as a matplotlib Figure (see the module docstring); written to ``path`` too."""
    if kind not in KINDS:
        raise FlopcountError(f"plot kind {kind!r}: choose one of {', '.join(KINDS)}")
    if path is not None:
        check_path(path)
    Figure = _matplotlib()
    if kind == "prediction":
        figure = Figure(figsize=(7, 6), layout="constrained")
        _draw_prediction(figure.add_subplot(), report)
        if path is not None:
            write_figure(figure, path)
        return figure
    layers = _layer_rows(report, depth, top) if kind != "roofline" else []
    bar_height = 0.8 + 0.24 * len(layers)
    height = {"layers": bar_height, "roofline": 5.0, "overview": bar_height + 5.5}[kind]
    figure = Figure(figsize=(11, height), layout="constrained")
    if kind == "overview":
        top_part, bottom_part = figure.subfigures(2, 1, height_ratios=[bar_height, 5.5])
        _draw_layers(top_part, report, layers)
        _draw_roofline(bottom_part.add_subplot(), report, hardware)
    elif kind == "layers":
        _draw_layers(figure, report, layers)
    else:
        _draw_roofline(figure.add_subplot(), report, hardware)
    figure.suptitle(f"{report.model or report.root.type}: {macs_to_string(report.macs)}, "
                    f"{flops_to_string(report.flops)}, {params_to_string(report.params)} params "
                    f"({report.mode} view, {report.convention} convention)")
    if path is not None:
        write_figure(figure, path)
    return figure


def _draw_prediction(ax, report) -> None:
    """Predicted and roofline time against measured time, one point per timed op."""
    ops = [o for o in report.by_op("forward") if o.latency_ms and o.predicted_ms is not None]
    if not ops:
        raise FlopcountError("plot kind 'prediction' needs measured times (latency=True) and a calibrated "
                             "profile (hardware=<a flopcount calibrate profile>)")
    measured = [o.latency_ms for o in ops]
    ax.scatter(measured, [o.predicted_ms for o in ops], s=14, label="predicted (calibrated)", color="#4C72B0")
    ax.scatter(measured, [max(o.roofline_ms, 1e-6) for o in ops], s=10, marker="x", label="roofline",
               color="#C44E52", alpha=0.6)
    low, high = min(measured) / 2, max(measured) * 2
    ax.plot([low, high], [low, high], color="grey", linewidth=1, label="equal")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("measured (ms)")
    ax.set_ylabel("predicted (ms)")
    t = report.totals
    ax.set_title(f"{report.model}: predicted {time_to_string(t['predicted_ms'])}, measured "
                 f"{time_to_string(report.latency_ms)} ({100 * t['predicted_error']:+.0f}%)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()


def write_figure(figure, path: str) -> None:
    """The figure into ``path`` atomically: drawn in memory first, so a failure leaves no
    half-written file."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format=os.path.splitext(str(path))[1].lower()[1:])
    atomic_write(path, buffer.getvalue())


def _layer_rows(report, depth: int, top: int | None) -> list:
    return [row for row, _ in tree_rows(report, depth=depth, top=top) if row.name != ""] or [report.root]


def _label(report, row) -> str:
    return row.name or report.model or row.type


def _draw_layers(figure, report, rows: list) -> None:
    """Horizontal bars, one panel per metric, the layers top to bottom in table order."""
    metrics = [("MACs", lambda r: r.macs, macs_to_string), ("Params", lambda r: r.params, params_to_string)]
    if report.latency_ms is not None:
        metrics.append(("Latency", lambda r: r.latency_ms or 0.0, time_to_string))
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    axes = figure.subplots(1, len(metrics), sharey=True)
    labels = [_label(report, r) for r in rows]
    positions = list(range(len(rows)))[::-1]  # the first row at the top
    for ax, (title, value, text) in zip(axes, metrics):
        values = [value(r) for r in rows]
        ax.barh(positions, values, color=BAR_COLORS[title])
        total = value(report.root) or sum(values) or 1
        ax.set_title(f"{title} (total {text(value(report.root))})", fontsize=10)
        for y, v in zip(positions, values):
            if v:
                ax.annotate(f"{100 * v / total:.1f}%", (v, y), xytext=(2, 0), textcoords="offset points",
                            va="center", fontsize=7)
        ax.margins(x=0.18)
        ax.tick_params(axis="x", labelsize=7)
        ax.xaxis.set_major_locator(MaxNLocator(3))  # human units are wide: three ticks fit
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos, text=text: text(v) if v else "0"))
    axes[0].set_yticks(positions, labels, fontsize=8)


def _roofs(report, hardware):
    return hw.get(hardware) if hardware is not None else report.hardware or hw.get("cpu")


def _op_points(report, profile) -> tuple:
    """(intensity, FLOP/s, op name) per forward op that computes and moves bytes, and whether
    the FLOP/s are measured."""
    timed = report.latency_ms is not None and any(o.latency_ms for o in report.by_op("forward"))
    points = []
    for rec in report.by_op("forward"):
        moved = rec.bytes_read + rec.bytes_written
        if rec.flops <= 0 or moved <= 0:
            continue
        if timed:
            if not rec.latency_ms:
                continue
            seconds = rec.latency_ms / 1e3
        else:
            seconds = hw.roofline(rec, profile, hw.compute_dtype(rec.input_dtypes)).time_s
        points.append((rec.flops / moved, rec.flops / seconds, rec.op))
    return points, timed


def _draw_roofline(ax, report, hardware) -> None:
    """Every op as a point under the memory slope and the compute roofs, log-log."""
    profile = _roofs(report, hardware)
    points, timed = _op_points(report, profile)
    dtype = report.dtype or "float32"
    peak = profile.peak(dtype)
    bandwidth = profile.memory_bandwidth
    intensities = [p[0] for p in points] or [1.0]
    low, high = min(min(intensities) / 2, 0.05), max(max(intensities) * 2, 4 * peak / bandwidth)
    xs = [low * (high / low) ** (i / 200) for i in range(201)]
    ax.plot(xs, [min(peak, bandwidth * x) for x in xs], color="black", lw=1.5,
            label=f"roof: {peak / 1e12:.3g} TFLOP/s {dtype} matrix, {bandwidth / 1e9:.3g} GB/s")
    ax.plot(xs, [min(profile.vector_flops, bandwidth * x) for x in xs], color="grey", lw=1, ls="--",
            label=f"vector roof: {profile.vector_flops / 1e12:.3g} TFLOP/s")
    counts: dict = {}
    for _, _, op in points:
        counts[op] = counts.get(op, 0) + 1
    colored = sorted(counts, key=counts.get, reverse=True)[:MAX_OP_COLORS]
    palette = ["#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3", "#8C8C8C"]
    for op in colored + ["other"]:
        chosen = [p for p in points if (p[2] == op if op != "other" else p[2] not in colored)]
        if chosen:
            color = palette[colored.index(op)] if op != "other" else "#BBBBBB"
            ax.scatter([p[0] for p in chosen], [p[1] for p in chosen], s=18, color=color, alpha=0.8,
                       label=f"{op} ({len(chosen)})", zorder=3)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOPs per byte read and written)")
    ax.set_ylabel("FLOP/s " + ("achieved (measured)" if timed else "estimated (roofline)"))
    ax.set_title(f"every op on {profile.title}", fontsize=10)
    ax.legend(fontsize=7, loc="lower right")
    ax.grid(True, which="both", alpha=0.2)
