"""Cost curves of a sweep: a metric against a swept axis, one line per model (and per value of
the other axes that vary), drawn with matplotlib."""

from __future__ import annotations

from ..report.plot import check_path, write_figure
from .cell import CELL_COLUMNS, TOTAL
from .grid import AXES, SweepError


def swept_axis(rows: list) -> str:
    """The first numeric axis with more than one value."""
    for axis in AXES:
        if len({row[axis] for row in rows if row[axis] is not None}) > 1:
            return axis
    raise SweepError("--plot draws a metric against --batch, --seq or --resolution: sweep one of them "
                     "over two values or more")


def plot_curves(rows: list, path: str, metric: str = "macs", x: str | None = None) -> None:
    """Write the curves of ``metric`` over ``x`` (default: the swept axis) to ``path`` (.svg,
    .png or .pdf). Failed cells leave a gap."""
    check_path(path)
    totals = [row for row in rows if row["layer"] in (TOTAL, None)]
    if not totals:
        raise SweepError("--plot: the sweep has no rows to draw")
    if metric not in totals[0]:
        raise SweepError(f"--plot-metric {metric!r} is not a column of the sweep")
    x = x or swept_axis(totals)
    if x not in AXES:
        raise SweepError(f"--plot-x must be one of {', '.join(AXES)}, got {x!r}")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    varying = [c for c in CELL_COLUMNS if c != x and c != "input_shape"
               and len({row[c] for row in totals}) > 1]
    lines: dict = {}
    for row in totals:
        label = ", ".join(str(row[c]) if c == "model" else f"{c}={row[c]}" for c in varying) or str(row["model"])
        if row[x] is not None and row.get("error") in (None, "") and row[metric] not in (None, ""):
            lines.setdefault(label, []).append((float(row[x]), float(row[metric])))
    figure, axes = plt.subplots(figsize=(7, 4.5))
    for label, points in lines.items():
        points.sort()
        axes.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=label)
    axes.set_xlabel(x)
    axes.set_ylabel(metric)
    axes.set_xscale("log", base=2)
    axes.set_yscale("log")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize="small")
    axes.set_title(f"{metric} by {x}")
    figure.tight_layout()
    try:
        write_figure(figure, path)
    finally:
        plt.close(figure)
