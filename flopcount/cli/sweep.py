"""``flopcount sweep MODELS...``: a grid of profiles, one row per cell, written as cells finish.

The grid, its cells and where they run are :mod:`flopcount.sweeps`; this module turns the
command line into them, draws the progress bar (with an ETA) and prints the result.
"""

from __future__ import annotations

import click

from .. import conventions, engines
from ..report.units import bytes_to_string, flops_to_string, macs_to_string, params_to_string
from ..sweeps import SweepError, grid, plot_curves, read_models, read_rows, run
from ..sweeps.cell import CELL_COLUMNS
from ..sweeps.grid import AXES, PHASES
from ..sweeps.plot import swept_axis
from . import progress
from .inputs import parse_factory_arg
from .options import with_options
from .render import check_output_path, emit


def _numbers(ctx, param, text):
    if text is None:
        return None
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise click.BadParameter(f"{text!r} is not a list of whole numbers such as 1,8,32", ctx=ctx, param=param)
    if not values or min(values) < 1:
        raise click.BadParameter(f"{text!r}: expected whole numbers >= 1 such as 1,8,32", ctx=ctx, param=param)
    return values


def _words(ctx, param, text):
    return None if text is None else [v.strip() for v in text.split(",") if v.strip()] or None


SWEEP_OPTIONS = [
    click.option("--batch", callback=_numbers, metavar="1,8,32", help="Batch sizes (every input's first dim)."),
    click.option("--seq", callback=_numbers, metavar="512,2048",
                 help="Sequence lengths: dim 1 of a token input; the prompt (prefill) or context (decode) "
                      "of an LLM --phase."),
    click.option("--resolution", callback=_numbers, metavar="224,448", help="Image sizes (height = width)."),
    click.option("-i", "--input-shape", "input_shape", multiple=True, metavar="TEMPLATE",
                 help="An input shape, with {batch}, {seq} or {resolution} filled in per cell: "
                      "input_ids=1x{seq}, 1x3x{resolution}x{resolution}. Repeat for several inputs."),
    click.option("--dtype", callback=_words, metavar="float32,bf16", help="Dtypes of weights and activations."),
    click.option("--weights", callback=_words, metavar="int8,int4", help="Weight formats of the Linear layers."),
    click.option("--hardware", callback=_words, metavar="h100-sxm,a100-80gb",
                 help="Roofline devices (adds roofline_ms; flopcount hardware lists them)."),
    click.option("--phase", callback=_words, metavar="forward,prefill,decode",
                 help=f"What each cell computes: {', '.join(PHASES)} (LLM phases take --seq).  [default: forward]"),
    click.option("--plan", "plan", multiple=True, metavar="dp=N,tp=N,pp=N",
                 help="Training plans (repeat the option): each cell prices a training step per GPU, with "
                      "--batch as the global batch (step_time_ms and mfu need --hardware)."),
    click.option("--mode", type=click.Choice(["graph", "eager"]), default="graph", show_default=True),
    click.option("--convention", type=click.Choice(conventions.NAMES), default="flopcount", show_default=True),
    click.option("--device", metavar="cpu|cuda", help="Where the cells that run a model run."),
    click.option("--latency", is_flag=True, help="Measure every cell's latency (cells then need a device each)."),
    click.option("--engine", type=click.Choice(engines.ENGINES), default="flopcount", show_default=True),
    click.option("--repeat", type=click.IntRange(min=1), default=5, show_default=True),
    click.option("--warmup", type=click.IntRange(min=0), default=1, show_default=True),
    click.option("--threads", type=click.IntRange(min=1), help="Threads of a timed cell on the CPU."),
    click.option("--factory-arg", "factory_args", multiple=True, metavar="KEY=VALUE",
                 help="Keyword argument for FILE.py:FACTORY models."),
    click.option("--layers", type=click.IntRange(min=1), metavar="DEPTH",
                 help="Also a row per module down to DEPTH in every cell (its totals row follows)."),
    click.option("-o", "--output", type=click.Path(dir_okay=False), metavar="FILE",
                 help="Write rows as cells finish: .csv, .jsonl or .parquet. A re-run skips the cells "
                      "already there. Without it, a table is printed at the end."),
    click.option("--workers", type=click.IntRange(min=1), help="Run cells on N local processes."),
    click.option("--ray", is_flag=False, flag_value="local", default=None, metavar="[ADDRESS]",
                 help="Run cells as Ray tasks: on the cluster at ADDRESS ('auto': the one this machine "
                      "belongs to), or alone, on a local cluster started for the sweep."),
    click.option("--plot", "plot_path", type=click.Path(dir_okay=False), metavar="FILE.svg|png",
                 help="Draw a metric against the swept axis, one line per model (needs matplotlib)."),
    click.option("--plot-metric", default="macs", show_default=True, metavar="COLUMN",
                 help="The metric --plot draws: macs, flops, params, peak_memory, roofline_ms ..."),
    click.option("--plot-x", type=click.Choice(["batch", "seq", "resolution"]),
                 help="The axis --plot draws along.  [default: the first swept one]"),
    click.option("-q", "--quiet", is_flag=True, help="No progress bar and no summary on stderr."),
    click.option("--debug", is_flag=True, help="Show the traceback of an error."),
]


sweep_options = with_options(SWEEP_OPTIONS)


def run_sweep(models: tuple, o: dict) -> None:
    """The sweep the options describe, its rows written or printed, its plot drawn."""
    if o["output"] is not None:
        check_output_path(o["output"])
    if o["plot_path"] is not None:
        from ..report.plot import check_path

        check_path(o["plot_path"])
    if o["workers"] is not None and o["ray"] is not None:
        raise SweepError("--workers and --ray choose where cells run: give one of them")
    cells = grid(read_models(models), batch=o["batch"], seq=o["seq"], resolution=o["resolution"],
                 input_shape=o["input_shape"], dtype=o["dtype"], weights=o["weights"], hardware=o["hardware"],
                 phase=o["phase"], plan=list(o["plan"]) or None)
    if o["plot_path"] is not None and o["plot_x"] is None:
        swept_axis([{axis: getattr(c, axis) for axis in AXES} for c in cells])  # refused before any cell runs
    options = {"mode": o["mode"], "convention": o["convention"], "latency": o["latency"], "engine": o["engine"],
               "repeat": o["repeat"], "warmup": o["warmup"], "device": o["device"], "threads": o["threads"],
               "factory_args": dict(parse_factory_arg(t) for t in o["factory_args"]) or None}
    ray = None if o["ray"] is None else (True if o["ray"] == "local" else o["ray"])
    with _Bar(progress.wanted(o["quiet"]) or (not o["quiet"] and progress.stderr_is_terminal())) as bar:
        outcome = run(cells, options, output=o["output"], layers=o["layers"], workers=o["workers"], ray=ray,
                      progress=bar.update)
    rows = read_rows(o["output"]) if o["output"] is not None else outcome.rows
    if o["output"] is None:
        emit(table(rows), None)
    if o["plot_path"] is not None:
        plot_curves(rows, o["plot_path"], metric=o["plot_metric"], x=o["plot_x"])
    if not o["quiet"]:
        resumed = f", {outcome.resumed} done before" if outcome.resumed else ""
        failed = f", {outcome.failed} failed (see the error column)" if outcome.failed else ""
        wrote = [p for p in (o["output"], o["plot_path"]) if p is not None]
        click.echo(f"flopcount: {outcome.cells} cells{resumed}{failed} in {outcome.seconds:.1f} s"
                   + (f"; wrote {' and '.join(wrote)}" if wrote else ""), err=True)


def table(rows: list) -> str:
    """The totals rows for a person: the axes that vary, then the costs in units."""
    from tabulate import tabulate

    totals = [r for r in rows if r["layer"] in ("", None)]
    shown = [c for c in CELL_COLUMNS if any(r[c] is not None for r in totals)]
    costs = [("MACs", "macs", macs_to_string), ("params", "params", params_to_string),
             ("peak memory", "peak_memory", bytes_to_string), ("KV cache", "kv_cache_bytes", bytes_to_string),
             ("roofline ms", "roofline_ms", lambda v: f"{v:.4g}"), ("latency ms", "latency_ms", lambda v: f"{v:.4g}"),
             ("step ms", "step_time_ms", lambda v: f"{v:.4g}"), ("MFU", "mfu", lambda v: f"{v:.1%}")]
    if any(r["macs"] is None and r["flops"] is not None for r in totals):   # training plans: model FLOPs
        costs.insert(1, ("FLOPs", "flops", flops_to_string))
    costs = [c for c in costs if any(r.get(c[1]) is not None for r in totals)]
    errors = any(r["error"] for r in totals)
    body = [[r[c] if r[c] is not None else "" for c in shown]
            + [fmt(r[key]) if r.get(key) is not None else "-" for _, key, fmt in costs]
            + ([_short(r["error"] or "")] if errors else []) for r in totals]
    headers = shown + [h for h, _, _ in costs] + (["error"] if errors else [])
    return tabulate(body, headers=headers, tablefmt="simple", disable_numparse=True) + "\n"


def _short(error: str, width: int = 72) -> str:
    """An error as a table cell: its start (the files keep it whole)."""
    return error if len(error) <= width else error[: width - 3] + "..."


class _Bar:
    """A progress bar over the cells, with the time left, on stderr for a person watching."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self._progress = None

    def __enter__(self) -> "_Bar":
        if self.enabled:
            from rich.console import Console
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                                       TimeRemainingColumn)

            self._progress = Progress(TextColumn("sweeping"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                                      TextColumn("ETA"), TimeRemainingColumn(), console=Console(stderr=True),
                                      transient=True)
            self._task = self._progress.add_task("cells", total=None)
            self._progress.start()
        return self

    def update(self, done: int, total: int) -> None:
        if self._progress is not None:
            self._progress.update(self._task, completed=done, total=total)

    def __exit__(self, *exc) -> None:
        if self._progress is not None:
            self._progress.stop()
