"""``flopcount diff A B``: two models or files compared layer by layer or op by op.

The rows are :mod:`flopcount.report.diff`'s (matched by name, then by position and type): the
changed, added and removed ones (``--all``: every row), then the totals. ``compare`` keeps the
totals-only, side-by-side view.
"""

from __future__ import annotations

import csv
import io
import json

from .render import rich_text

FORMATS = ("table", "markdown", "json", "csv", "html")


def render(diff, fmt: str, every: bool = False, rich: bool = False):
    """The diff in ``fmt`` (text), or a rich renderable for a terminal when ``rich``."""
    if fmt == "json":
        return json.dumps(diff.to_dict(), indent=2) + "\n"
    if fmt == "html":
        from ..report.page import diff_page

        return diff_page(diff)
    if fmt == "csv":
        rows = [r.to_dict() for r in diff.rows if every or r.status != "same"]
        buffer = io.StringIO()
        columns = list(rows[0]) if rows else ["status"]
        writer = csv.DictWriter(buffer, columns, lineterminator="\n")
        writer.writeheader()
        writer.writerows({k: "" if v is None else v for k, v in r.items()} for r in rows)
        return buffer.getvalue()
    headers, body = diff.cells(every=every)
    footer = diff.footer()
    if fmt == "markdown":
        from tabulate import tabulate

        text = tabulate(body, headers=headers, tablefmt="pipe", disable_numparse=True)
        return text + "\n\n" + "\n".join(footer) + "\n"
    table = _rich_table(headers, body, title=f"{footer[0]}", footer=footer[1:])
    return table if rich else rich_text(table)


def _rich_table(headers: list, body: list, title: str, footer: list):
    """Names and types read from the left, the numbers line up on the right."""
    from rich.table import Table

    table = Table(title=title, caption="\n".join(footer), caption_justify="left")
    for i, h in enumerate(headers):
        table.add_column(h, justify="left" if i < 4 else "right", no_wrap=True)
    for row in body:
        table.add_row(*row)
    return table
