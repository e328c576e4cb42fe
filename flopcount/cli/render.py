"""A Report (or any rows of cells) in the format the command line asks for, and where it goes.

Human formats (table, markdown) honour depth, top, sort and view; machine formats (json, csv,
trace) carry every row with raw integers; html is one self-contained page to explore
(``flopcount.report.page``). Text goes to stdout untouched, or atomically to a file.
"""

from __future__ import annotations

import csv
import io
import json
import os
import sys

from ..io_utils import atomic_write
from ..report.table import table_pieces, without_trailing_blanks
from ..runtime import errors

FORMATS = ("table", "markdown", "json", "csv", "trace", "html")
MACHINE_FORMATS = ("json", "csv", "trace")
TEXT_WIDTH = 1000
WRITE_CHUNK = 1 << 20  # characters




def op_type_csv(report) -> str:
    """CSV of the op-type summary (one line per op type, forward pass)."""
    summary = report.by_op_type(phase="forward")
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    columns = ("op", "calls", "counted_calls", "macs", "flops", "bytes_read", "bytes_written", "latency_ms")
    writer.writerow(columns)
    for s in summary:
        d = s.to_dict()
        writer.writerow(["" if d[c] is None else d[c] for c in columns])
    return buffer.getvalue()


def render_report(report, fmt: str, *, depth=None, top=None, sort=None, by: str = "module") -> str:
    """``report`` as text in ``fmt`` (table text without colour; see :func:`print_table`)."""
    return "".join(report_pieces(report, fmt, depth=depth, top=top, sort=sort, by=by))


def report_pieces(report, fmt: str, *, depth=None, top=None, sort=None, by: str = "module", timeline=None):
    """:func:`render_report` as pieces of text to write one after another: a table of many rows
    comes a line at a time, so its text is never held whole (see :func:`emit`). ``timeline``:
    html only (see ``Report.to_html``)."""
    if fmt == "table":
        # wide enough that no column is squeezed (long op scopes); trailing blanks are stripped
        return table_pieces(report, depth=depth, top=top, sort=sort, by=by, width=TEXT_WIDTH, trailing_blanks=False)
    if fmt == "markdown":
        text = report.markdown(depth=depth, top=top, sort=sort, by=by)
    elif fmt == "json":
        text = report.to_json() + "\n"
    elif fmt == "csv":
        text = op_type_csv(report) if by == "op-type" else report.to_csv(by=by)
    elif fmt == "trace":
        text = json.dumps(report.chrome_trace()) + "\n"
    elif fmt == "html":
        text = report.to_html(timeline=timeline)
    else:
        raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    return iter([text])


def stdout_is_terminal() -> bool:
    return sys.stdout.isatty()


def check_output_path(path: str) -> None:
    """Fail before any work when ``--output`` cannot be written."""
    if not path:
        raise errors.FlopcountError("--output '': an empty path; give a file name, or leave -o out for stdout")
    directory = os.path.dirname(os.path.abspath(path)) or "."
    if os.path.isdir(path):
        raise errors.FlopcountError(f"--output {path}: is a directory")
    if not os.path.isdir(directory):
        raise errors.FlopcountError(f"--output {path}: the directory {directory} does not exist")
    if not os.access(directory, os.W_OK):
        raise errors.FlopcountError(f"--output {path}: the directory {directory} is not writable")


def emit(text, output: str | None) -> None:
    """Write ``text`` (a string, or pieces of one: :func:`report_pieces`) to ``output``
    atomically, or to stdout as the pieces come."""
    pieces = [text] if isinstance(text, str) else text
    if output is None:
        try:
            for piece in pieces:
                # a long piece a part at a time: it is not encoded into a second copy all at once
                for start in range(0, len(piece), WRITE_CHUNK):
                    sys.stdout.write(piece[start:start + WRITE_CHUNK])
            sys.stdout.flush()
        except BrokenPipeError:
            # the reader has gone (``| head``): the rest is not wanted, and no error of ours;
            # stdout goes to /dev/null so that Python's flush at exit does not fail again
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    else:
        atomic_write(output, "".join(pieces))


def print_rich(renderable) -> None:
    """A rich renderable on the terminal's stdout, in colour and at the terminal's width."""
    from rich.console import Console

    Console().print(renderable)


def rich_text(renderable, width: int = TEXT_WIDTH) -> str:
    """A rich renderable as plain text (no colour codes), as wide as it needs up to ``width``."""
    from rich.console import Console

    buffer = io.StringIO()
    Console(file=buffer, width=width, color_system=None, force_terminal=False).print(renderable)
    return without_trailing_blanks(buffer.getvalue())


def rows_text(headers: list, rows: list, fmt: str, title: str | None = None, footer: list | None = None) -> str:
    """Simple tables (the model list, a comparison) in table, markdown, csv or json form.

    ``rows`` are lists of cells; json writes a list of objects keyed by header."""
    if fmt == "json":
        return json.dumps([dict(zip(headers, r)) for r in rows], indent=2) + "\n"
    if fmt == "csv":
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(headers)
        writer.writerows(rows)
        return buffer.getvalue()
    if fmt == "markdown":
        from tabulate import tabulate

        text = tabulate([[str(c) for c in r] for r in rows], headers=headers, tablefmt="pipe",
                        disable_numparse=True)
        return text + ("\n\n" + "\n".join(footer) if footer else "") + "\n"
    return rich_text(rich_table(headers, rows, title, footer))


def rich_table(headers: list, rows: list, title: str | None = None, footer: list | None = None):
    """A rich Table: first column left-aligned, numbers right-aligned. The first column holds
    names a reader copies (``mobilenet_v3_large``): it keeps its full width on a narrow
    terminal, and the other columns wrap instead."""
    from rich.cells import cell_len
    from rich.table import Table

    table = Table(title=title, caption="\n".join(footer or []) or None, caption_justify="left")
    names = max([cell_len(str(h)) for h in headers[:1]] + [cell_len(str(r[0])) for r in rows if r])
    for i, h in enumerate(headers):
        left = i == 0 or h in ("Family", "Description", "Default input")
        table.add_column(h, justify="left" if left else "right", min_width=names if i == 0 else None,
                         no_wrap=i == 0)
    for r in rows:
        table.add_row(*[str(c) for c in r])
    return table


__all__ = ["FORMATS", "MACHINE_FORMATS", "render_report", "report_pieces", "op_type_csv", "emit", "check_output_path",
           "print_rich", "rich_text", "rows_text", "rich_table", "stdout_is_terminal"]
