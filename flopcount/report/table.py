"""Table renderers: a rich tree table for terminals and tabulate for plain text and markdown.

Both draw the same cells (:func:`cells`), so the two only differ in how they are printed.
"""

from __future__ import annotations

import io

from .layout import fit
from .units import (bytes_to_string, flops_to_string, macs_to_string, params_to_string, percent,
                    rate_to_string, time_to_string)
from .views import VIEWS, by_op_type, check_sort, tree_rows

# words and shapes read from the left; numbers line up on the right
LEFT_ALIGNED = frozenset({"Module", "Type", "Node", "Op", "Scope", "Input shape", "Output shape"})
TABULATE_FORMATS = {"plain": "plain", "github": "github", "grid": "grid", "markdown": "pipe"}


MAX_SHAPES = 8  # shapes listed in a cell; a Sum of 100,000 inputs made a 600 KB one


def _shapes(shapes) -> str:
    """'1x3x224x224, 1x10' ('-' for an absent optional input, '' for none); past
    ``MAX_SHAPES``, the first ones and how many there are."""
    listed = ", ".join("x".join(str(d) for d in s) if s is not None else "-" for s in shapes[:MAX_SHAPES])
    return listed if len(shapes) <= MAX_SHAPES else f"{listed}, ... ({len(shapes):,} inputs)"


def _timed_backward(report) -> bool:
    return report.backward and report.backward_latency_ms is not None


def _module_cells(report, depth, top, sort) -> tuple:
    total = report.root
    timed = report.latency_ms is not None
    headers = ["Module", "Type", "Params", "Params %", "MACs", "MACs %", "FLOPs", "FLOPs %", "Out bytes",
               "Input shape", "Output shape"]
    if timed:
        headers += ["Latency", "Latency %", "FLOP/s"]
    if report.backward:
        headers += ["Bwd MACs", "Bwd FLOPs"] + (["Bwd latency"] if _timed_backward(report) else [])
    headers += _roofline_headers(report)
    body = []
    flat = top is not None
    same: dict = {}  # most cells repeat ("0", "-", "1x16"): one string each, not one per row
    for row, indent in tree_rows(report, depth=depth, top=top, sort=sort):
        if row.name == "":
            label = report.model or row.type
        elif flat:
            label = row.name
        else:
            label = "  " * (indent - 1) + "└ " + row.name.rsplit(".", 1)[-1].rsplit("/", 1)[-1]
        note = " *" if row.counted_by == "covered" else ""
        cells = [label, row.type + note, params_to_string(row.params), percent(row.params, total.params),
                 macs_to_string(row.macs), percent(row.macs, total.macs),
                 flops_to_string(row.flops), percent(row.flops, total.flops),
                 bytes_to_string(row.output_bytes), _shapes(row.input_shapes), _shapes(row.output_shapes)]
        if timed:
            # shares of the root row, timed in the same runs (nested spans, or summed nodes)
            cells += [time_to_string(row.latency_ms), percent(row.latency_ms or 0.0, total.latency_ms or 0.0),
                      rate_to_string(row.flops_per_second, "FLOP")]
        if report.backward:
            cells += [macs_to_string(row.backward_macs), flops_to_string(row.backward_flops)]
            if _timed_backward(report):
                cells.append(time_to_string(row.backward_latency_ms))
        body.append([same.setdefault(c, c) for c in cells + _roofline_cells(report, row)])
    return headers, body


def _roofline_headers(report) -> list:
    """With a hardware profile: the roofline time, its bound, and (when timed) the roofline as
    a share of the measured latency."""
    if report.hardware is None:
        return []
    timed = report.latency_ms is not None
    predicted = (["Predicted"] + (["Pred. error"] if timed else [])) if report.hardware.curves else []
    return ["Roofline", "Bound"] + (["Roofline %"] if timed else []) + predicted


def _roofline_cells(report, item) -> list:
    if report.hardware is None:
        return []
    cells = [time_to_string(item.roofline_ms), item.bound or "-"]
    if report.latency_ms is not None:
        fraction = item.roofline_fraction
        cells.append("-" if fraction is None else f"{100 * fraction:.1f}%")
    if report.hardware.curves:
        cells.append(time_to_string(item.predicted_ms))
        if report.latency_ms is not None:
            error = item.predicted_ms / item.latency_ms - 1 if item.predicted_ms is not None and item.latency_ms else None
            cells.append("-" if error is None else f"{100 * error:+.0f}%")
    return cells


def _op_type_cells(report, top, sort) -> tuple:
    summary = by_op_type(report)
    total_macs = sum(s.macs for s in summary)
    total_flops = sum(s.flops for s in summary)
    total_ms = sum(s.latency_ms or 0.0 for s in summary)
    key = {"latency": lambda s: s.latency_ms or 0.0, "macs": lambda s: s.macs,
           "memory": lambda s: s.bytes_written}.get(sort or "")
    if key is not None:
        summary.sort(key=key, reverse=True)
    if top is not None:
        summary = summary[:top]
    timed = report.latency_ms is not None
    headers = ["Op", "Calls", "MACs", "MACs %", "FLOPs", "FLOPs %", "Bytes read", "Bytes written"]
    if timed:
        headers += ["Latency", "Latency %"]
    priced = report.hardware is not None
    if priced:
        headers += ["Roofline", "Roofline share"]
        total_roofline = sum(s.roofline_ms or 0.0 for s in summary)
    body = []
    for s in summary:
        cells = [s.op, str(s.calls), macs_to_string(s.macs), percent(s.macs, total_macs),
                 flops_to_string(s.flops), percent(s.flops, total_flops), bytes_to_string(s.bytes_read),
                 bytes_to_string(s.bytes_written)]
        if timed:
            cells += [time_to_string(s.latency_ms), percent(s.latency_ms or 0.0, total_ms)]
        if priced:
            cells += [time_to_string(s.roofline_ms), percent(s.roofline_ms or 0.0, total_roofline)]
        body.append(cells)
    return headers, body


def _op_cells(report, top, sort) -> tuple:
    records = report.by_op("forward")
    # top-k means the k most expensive (MACs unless another key is asked), not the first k run
    key = {"macs": "macs", "flops": "flops", "latency": "latency_ms", "memory": "bytes_written"}.get(
        sort or ("macs" if top is not None else ""))
    if key is not None:
        records = sorted(records, key=lambda r: getattr(r, key) or 0, reverse=True)
    if top is not None:
        records = records[:top]
    timed = report.latency_ms is not None
    headers = ["Node", "Op", "Scope", "Input shape", "Output shape", "MACs", "FLOPs", "Bytes R/W", "FLOP/B"]
    if timed:
        headers += ["Latency", "FLOP/s"]
    headers += _roofline_headers(report)
    body = []
    for r in records:
        cells = [r.name, r.op + ("" if r.counted else " (not counted)"), r.scope or "-",
                 _shapes(r.input_shapes), _shapes(r.output_shapes), macs_to_string(r.macs),
                 flops_to_string(r.flops), f"{bytes_to_string(r.bytes_read)} / {bytes_to_string(r.bytes_written)}",
                 "-" if r.intensity is None else f"{r.intensity:.2f}"]
        if timed:
            cells += [time_to_string(r.latency_ms), rate_to_string(r.flops_per_second, "FLOP")]
        body.append(cells + _roofline_cells(report, r))
    return headers, body


def cells(report, depth=None, top=None, sort=None, by: str = "module") -> tuple:
    """(headers, rows of strings) for the chosen view: module (tree), op-type, or op."""
    if by not in VIEWS:
        raise ValueError(f"unknown view {by!r}; choose one of {', '.join(VIEWS)}")
    check_sort(report, sort)
    if by == "op-type":
        return _op_type_cells(report, top, sort)
    if by == "op":
        return _op_cells(report, top, sort)
    return _module_cells(report, depth, top, sort)


def _bytes(value) -> str:
    return "-" if value is None else bytes_to_string(value)


def _footer(report) -> list:
    lines = [f"convention: {report.convention} | mode: {report.mode} | device: {report.device}"
             + (f" | engine: {report.engine}" if report.engine != "flopcount" else "")
             + (f" | dtype: {report.dtype}" if report.dtype else "")
             + (f" | input: {_shapes(report.input_shapes)}" if report.input_shapes else "")]
    t = report.totals
    lines.append(f"total: {macs_to_string(t['macs'])}, {flops_to_string(t['flops'])}, "
                 f"{params_to_string(t['params'])} params ({params_to_string(t['frozen_params'])} frozen)")
    if set(t["macs_by_dtype"]) - {"float32"}:  # MACs that do not all run in float32
        lines.append("MACs by dtype: " + ", ".join(f"{dtype} {macs_to_string(macs)}"
                                                   for dtype, macs in t["macs_by_dtype"].items()))
    if report.latency_ms is not None:
        lines.append(_latency_line(report))
    if report.threads is not None:
        lines.append(f"threads: {report.threads.describe()}")
    if report.backward:
        lines.append(f"training step: {macs_to_string(t['training_macs'])}, {flops_to_string(t['training_flops'])} "
                     f"(backward {macs_to_string(t['backward_macs'])}{_backward_time(report)})")
    if report.hardware is not None:
        line = (f"roofline on {report.hardware.title}: {time_to_string(t['roofline_ms'])} forward, "
                f"{t['roofline_bound'] or '-'}-bound; needs {bytes_to_string(t['memory_needed_bytes'])} of "
                f"{bytes_to_string(report.hardware.memory_bytes)}" + ("" if t["fits_memory"] else " (does not fit)"))
        if t["roofline_fraction"] is not None:
            line += f"; measured latency {time_to_string(report.latency_ms)} ({100 * t['roofline_fraction']:.1f}% of it is the bound)"
        lines.append(line)
        if t.get("predicted_ms") is not None:
            how = report.hardware.calibration
            line = (f"predicted {time_to_string(t['predicted_ms'])} forward (calibrated with {how.get('engine', '?')} "
                    f"on {how.get('date', '?')})")
            if t["predicted_error"] is not None:
                line += f"; measured {time_to_string(report.latency_ms)}: {100 * t['predicted_error']:+.1f}% off"
            lines.append(line)
    m = report.memory
    if m.predicted_peak is not None or m.measured_peak is not None:
        line = (f"memory: params {bytes_to_string(m.parameter_bytes)}, buffers {bytes_to_string(m.buffer_bytes)}, "
                f"peak activations predicted {_bytes(m.predicted_peak)}")
        if m.measured_peak is not None:
            line += (f" / measured {_bytes(m.measured_activation_peak)} between ops "
                     f"({_bytes(m.measured_peak)} with kernel temporaries)")
        lines.append(line)
        if m.training_predicted_peak is not None:
            lines.append(f"training step peak: predicted {_bytes(m.training_predicted_peak)}"
                         + (f" / measured {_bytes(m.training_measured_activation_peak)} between ops "
                            f"({_bytes(m.training_measured_peak)} with kernel temporaries)"
                            if m.training_measured_peak is not None else ""))
    if report.seen_not_counted:
        lines.append(f"seen, not counted ({report.convention} convention): {len(report.seen_not_counted)} ops, "
                     f"{macs_to_string(t['seen_not_counted_macs'])}")
    if report.folded:
        lines.append(f"folded: {len(report.folded)} ops on constants only (not counted; a graph folds them)")
    if report.unsupported:
        lines.append("no rule: " + "; ".join(str(u) for u in report.unsupported))
    lines.extend(f"note: {note}" for note in report.notes)
    if any(r.counted_by == "covered" for r in report.rows):
        lines.append("* inside a module with a module rule: shown, not added again")
    lines.extend(f"warning: {w}" for w in report.warnings)
    return lines


def _backward_time(report) -> str:
    """The backward pass's measured time, or, where the forward was timed and it was not, why."""
    if _timed_backward(report):
        return f", {time_to_string(report.backward_latency_ms)}"
    if report.latency_ms is not None:
        return ", not timed: no output of the model needs a gradient"
    return ""


def _latency_line(report) -> str:
    """The whole model's time, and why the model row's time differs from it: the rows come from
    runs synchronized at every layer or op, the total from runs without that."""
    line = (f"latency: {time_to_string(report.latency_ms)} whole model (median; fastest "
            f"{time_to_string(report.latency_min_ms)})")
    root = report.root.latency_ms
    if root is not None:
        line += f"; the rows are timed layer by layer, {time_to_string(root)} in all"
    return line


def tabulate_text(report, fmt: str = "github", depth=None, top=None, sort=None, by: str = "module") -> str:
    """The table through ``tabulate`` in one of: plain, github, grid, markdown."""
    from tabulate import tabulate

    try:
        tablefmt = TABULATE_FORMATS[fmt]
    except KeyError:
        raise ValueError(f"unknown table format {fmt!r}; choose one of {', '.join(TABULATE_FORMATS)}") from None
    headers, body = cells(report, depth, top, sort, by)
    text = tabulate(body, headers=headers, tablefmt=tablefmt, disable_numparse=True)
    return text + "\n\n" + "\n".join(_footer(report)) + "\n"


# rich lays out every cell of every row in Python, a cost per row that makes a huge graph's
# table take far longer than counting it (benchmarks/RESULTS.md, "Figures behind design choices
# in the code"). Above this many rows the same cells, title and footer are drawn in a box of the
# same lines by _large_table_lines: padding strings only (tabulate, tried first, spends most of
# its time guessing each cell's type), so no colours and no cutting.
RICH_MAX_ROWS = 2000


def _laid_out(report, depth, top, sort, by, width) -> tuple:
    """(title, headers, body, layout, footer) of the table at ``width`` cells."""
    headers, body = cells(report, depth, top, sort, by)
    layout = fit(headers, body, width)
    title = f"{report.model or report.root.type} — {report.mode} view, {report.convention} convention"
    footer = _footer(report)
    if layout.dropped:
        footer.insert(0, f"columns left out at {width} columns: {', '.join(layout.dropped)} "
                         f"(a wider terminal, or --format markdown/csv/json, shows them)")
    return title, headers, body, layout, footer


def _large_table_lines(title: str, headers: list, body: list, layout, footer: list,
                       trailing_blanks: bool = True):
    """The box's lines, one at a time (a million-row table is written as it is drawn, never
    held as one text); ``body`` is used up, each row's cells let go once its line is drawn.
    Without ``trailing_blanks``, every line is as :func:`without_trailing_blanks` leaves it."""
    from rich.cells import cell_len

    names = layout.headers
    columns = layout.columns
    left = [headers[i] in LEFT_ALIGNED for i in columns]
    widths = [max([cell_len(name)] + [cell_len(row[i]) for row in body]) for i, name in zip(columns, names)]

    def line(texts) -> str:
        padded = [t + " " * (w - cell_len(t)) if is_left else " " * (w - cell_len(t)) + t
                  for t, w, is_left in zip(texts, widths, left)]
        return "│ " + " │ ".join(padded) + " │"

    def rule(first: str, middle: str, last: str) -> str:
        return first + middle.join("─" * (w + 2) for w in widths) + last

    def lines():
        yield from (title, rule("┌", "┬", "┐"), line(names), rule("├", "┼", "┤"))
        for k, row in enumerate(body):
            body[k] = None
            yield line([row[i] for i in columns])
        yield from (rule("└", "┴", "┘"), *footer)

    drawn = (lambda text: text) if trailing_blanks else _without_trailing_blanks_line
    return (drawn(text) for text in lines())


def without_trailing_blanks(text: str) -> str:
    """``text`` with the blanks at the end of each line removed (rich pads every line of a
    table to its width; they only get in a reader's way), ending in one newline."""
    return "\n".join(line.rstrip() for line in text.splitlines()) + "\n"


def _without_trailing_blanks_line(line: str) -> str:
    # what without_trailing_blanks does to this line of a text, line by line (a cell may hold a
    # line break of its own, which splitlines splits there too)
    return "\n".join(part.rstrip() for part in (line + "\n").splitlines())


def rich_table(report, depth=None, top=None, sort=None, by: str = "module", width: int | None = None):
    """The report as a rich Table no wider than ``width`` cells (see :mod:`.layout`: share
    columns go first, then long headers, then text is cut; numbers never wrap)."""
    title, headers, body, layout, footer = _laid_out(report, depth, top, sort, by, width)
    return _rich(title, headers, body, layout, footer)


def _rich(title: str, headers: list, body: list, layout, footer: list):
    from rich.table import Table

    table = Table(title=title, caption="\n".join(footer), caption_justify="left")
    for i, name in zip(layout.columns, layout.headers):
        table.add_column(name, justify="left" if headers[i] in LEFT_ALIGNED else "right", no_wrap=True,
                         overflow="ellipsis", max_width=layout.max_widths.get(i))
    for row in body:
        table.add_row(*[row[i] for i in layout.columns])
    return table


def print_rich_table(report, depth=None, top=None, sort=None, by: str = "module", file=None) -> None:
    """Print the rich table at the terminal's width (colors when the output is a terminal)."""
    from rich.console import Console

    console = Console(file=file)
    parts = _laid_out(report, depth, top, sort, by, console.width)
    if len(parts[2]) > RICH_MAX_ROWS:
        for line in _large_table_lines(*parts):
            console.file.write(line + "\n")
        return
    console.print(_rich(*parts))


def rich_table_text(report, depth=None, top=None, sort=None, by: str = "module", width: int | None = None,
                    trailing_blanks: bool = True) -> str:
    """The rich table as plain text (no color codes), at most ``width`` (default 200) cells wide;
    without ``trailing_blanks``, as :func:`without_trailing_blanks` leaves it."""
    return "".join(table_pieces(report, depth, top, sort, by, width, trailing_blanks))


def table_pieces(report, depth=None, top=None, sort=None, by: str = "module", width: int | None = None,
                 trailing_blanks: bool = True):
    """:func:`rich_table_text` in pieces, to write one at a time: a line each for a table of
    more than ``RICH_MAX_ROWS`` rows (its cells are laid out before the first one)."""
    from rich.console import Console

    width = width or 200
    parts = _laid_out(report, depth, top, sort, by, width)
    if len(parts[2]) > RICH_MAX_ROWS:
        return (line + "\n" for line in _large_table_lines(*parts, trailing_blanks=trailing_blanks))
    buffer = io.StringIO()
    Console(file=buffer, width=width, color_system=None, force_terminal=False).print(_rich(*parts))
    return iter([buffer.getvalue() if trailing_blanks else without_trailing_blanks(buffer.getvalue())])
