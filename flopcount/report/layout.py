"""Fitting a table to a terminal's width without wrapping a number.

A 9-column table squeezed into 80 columns makes rich wrap every cell ("1.81" over "GMac").
Instead, as the width shrinks, the table drops the share columns ("MACs %"), then shortens
long headers, then lets the text columns (module names, types, scopes, shapes) give up width,
cut with an ellipsis, and last drops secondary columns (scope, shapes, rates, types) one by
one. Number columns keep their full width and never wrap.

    >>> fit(["Module", "MACs", "MACs %"], [["layer1", "1.81 GMac", "100.00%"]], 30).headers
    ['Module', 'MACs']
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rich.cells import cell_len

# columns of words rather than numbers: they may be cut (with an ellipsis) to fit
TEXT_COLUMNS = frozenset({"Module", "Type", "Node", "Op", "Scope", "Inputs", "Outputs"})
SHORT_HEADERS = {"Bytes read": "Read", "Bytes written": "Written", "Bytes R/W": "R/W", "Latency": "Time",
                 "Bwd MACs": "Bwd MAC", "Bwd FLOPs": "Bwd FLOP", "Output": "Out", "Inputs": "In",
                 "Outputs": "Out"}
SHARE_SUFFIX = " %"
# dropped in this order when cutting text is not enough (the op view has 11 columns)
SECONDARY = ("Scope", "Inputs", "FLOP/s", "FLOP/B", "Outputs", "Bytes R/W", "Bytes read", "Bytes written",
             "Type", "Output", "Bwd FLOPs", "Calls")
MIN_TEXT_WIDTH = 8    # a cut text column still shows this many cells ("└ layer…")


@dataclass
class Layout:
    """The columns to show (indices into the full table), their headers, and the widths the
    text columns are cut to (column index -> cells)."""

    columns: list
    headers: list
    max_widths: dict = field(default_factory=dict)


def table_width(widths: list) -> int:
    """Cells a rich table with these column widths takes: one space of padding either side of
    each column and a border between and around them."""
    return sum(w + 2 for w in widths) + len(widths) + 1


def _natural(headers: list, body: list, columns: list) -> list:
    return [max([cell_len(headers[k])] + [cell_len(row[i]) for row in body]) for k, i in enumerate(columns)]


def fit(headers: list, body: list, width: int | None) -> Layout:
    """The fullest layout of ``headers``/``body`` (strings) no wider than ``width`` cells (the
    narrowest one tried when none fits)."""
    every = list(range(len(headers)))
    if width is None:
        return Layout(every, list(headers))
    no_shares = [i for i in every if not headers[i].endswith(SHARE_SUFFIX)]
    for columns, names in ((every, list(headers)), (no_shares, [headers[i] for i in no_shares])):
        if table_width(_natural(names, body, columns)) <= width:
            return Layout(columns, names)
    columns = no_shares
    for drop in (None,) + SECONDARY:
        if drop is not None:
            if len(columns) <= 2 or drop not in (headers[i] for i in columns):
                continue
            columns = [i for i in columns if headers[i] != drop]
        names = [SHORT_HEADERS.get(headers[i], headers[i]) for i in columns]
        natural = _natural(names, body, columns)
        if table_width(natural) <= width:
            return Layout(columns, names)
        widths = _cut_text([headers[i] in TEXT_COLUMNS for i in columns], names, natural, width)
        cut = {columns[k]: w for k, w in enumerate(widths) if w < natural[k]}
        if table_width(widths) <= width:
            return Layout(columns, names, cut)
    return Layout(columns, names, cut)


def _cut_text(is_text: list, headers: list, natural: list, width: int) -> list:
    """Column widths after narrowing the widest text column to the next widest, again and
    again (rich's own rule, kept away from the numbers), until the table fits or every text
    column is at its floor."""
    widths = list(natural)
    text = [k for k, flag in enumerate(is_text) if flag]
    floors = {k: min(natural[k], max(MIN_TEXT_WIDTH, cell_len(headers[k]))) for k in text}
    excess = table_width(widths) - width
    while excess > 0:
        shrinkable = [k for k in text if widths[k] > floors[k]]
        if not shrinkable:
            break
        widest = max(shrinkable, key=lambda k: widths[k])
        runner_up = max((widths[k] for k in shrinkable if k != widest), default=floors[widest])
        target = max(floors[widest], runner_up, widths[widest] - excess)
        if target == widths[widest]:  # level with the next widest: take one cell, then alternate
            target -= 1
        excess -= widths[widest] - target
        widths[widest] = target
    return widths
