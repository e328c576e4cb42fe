"""``Report._repr_html_``: the module table as an HTML table for notebooks."""

from __future__ import annotations

import html

from .table import _footer, cells


def to_html(report, depth: int | None = 3) -> str:
    """An HTML table of the module tree (down to ``depth``) with the totals underneath."""
    headers, body = cells(report, depth=depth)
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    lines = []
    for row in body:
        tds = [f'<td style="text-align:left;white-space:pre">{html.escape(row[0])}</td>']
        tds += [f"<td>{html.escape(c)}</td>" for c in row[1:]]
        lines.append("<tr>" + "".join(tds) + "</tr>")
    footer = "<br>".join(html.escape(line) for line in _footer(report))
    return (f"<div><table><thead><tr>{head}</tr></thead><tbody>{''.join(lines)}</tbody></table>"
            f"<p style=\"font-family:monospace\">{footer}</p></div>")
