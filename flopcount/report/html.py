"""``Report._repr_html_``: the module table as HTML for notebooks, each share shaded as a bar.

A share cell ("MACs %", "Params %", "FLOPs %", "Latency %") carries a bar as wide as its share
(a CSS gradient behind the number), so the expensive layers stand out as in a chart; shapes,
names and numbers are the table's own cells. ``to_html(report, path=...)``-style files come from
:func:`html_page`, a standalone page (used for screenshots).
"""

from __future__ import annotations

import html

from .table import LEFT_ALIGNED, _footer, cells

SHARE_COLORS = {"Params %": "#55A86855", "MACs %": "#4C72B055", "FLOPs %": "#8172B355",
                "Latency %": "#C44E5255"}
STYLE = ("<style>.flopcount-report table{border-collapse:collapse;font-family:ui-monospace,monospace;"
         "font-size:12px}.flopcount-report th,.flopcount-report td{padding:2px 8px;"
         "border-bottom:1px solid #ddd;white-space:pre}.flopcount-report th{text-align:right}"
         ".flopcount-report td{text-align:right}.flopcount-report .text{text-align:left}"
         ".flopcount-report p{font-family:ui-monospace,monospace;font-size:12px}</style>")


def _share(text: str) -> float | None:
    """'12.34%' -> 12.34; None for '-'."""
    try:
        return max(0.0, min(100.0, float(text.rstrip("%"))))
    except ValueError:
        return None


def _cell(header: str, text: str) -> str:
    klass = ' class="text"' if header in LEFT_ALIGNED else ""
    color = SHARE_COLORS.get(header)
    share = _share(text) if color else None
    style = ""
    if share is not None:
        style = (f' style="background:linear-gradient(90deg,{color} {share:.2f}%,transparent {share:.2f}%)"'
                 f' title="{share:.2f}% of the model"')
    return f"<td{klass}{style}>{html.escape(text)}</td>"


def to_html(report, depth: int | None = 3) -> str:
    """An HTML table of the module tree (down to ``depth``), shares as bars, totals underneath."""
    headers, body = cells(report, depth=depth)
    head = "".join(f'<th{" class=text" if h in LEFT_ALIGNED else ""}>{html.escape(h)}</th>' for h in headers)
    lines = ["<tr>" + "".join(_cell(h, c) for h, c in zip(headers, row)) + "</tr>" for row in body]
    footer = "<br>".join(html.escape(line) for line in _footer(report))
    return (f'<div class="flopcount-report">{STYLE}<table><thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(lines)}</tbody></table><p>{footer}</p></div>")


def html_page(report, depth: int | None = 3, title: str | None = None) -> str:
    """A standalone HTML page of :func:`to_html` (what a notebook shows), for a browser."""
    title = html.escape(title or f"{report.model or report.root.type}: flopcount report")
    return (f"<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>{title}</title></head>"
            f"<body style=\"margin:16px;background:#fff\">{to_html(report, depth)}</body></html>\n")
