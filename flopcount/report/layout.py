"""Fitting a table to a terminal's width without wrapping a number or cutting a name.

A 9-column table squeezed into 80 columns makes rich wrap every cell ("1.81" over "GMac").
Instead, as the width shrinks, the table drops the share columns ("MACs %"), then shortens
long headers, then lets the secondary text columns (types, scopes, shapes) give up width, cut
with an ellipsis, then drops secondary columns one by one. The first column (the module path
or node name, what a reader copies into code or a search) is cut only when nothing else is
left to give. Number columns keep their full width and never wrap. What was left out is
listed in ``Layout.dropped``, and the table says so under itself.

    >>> layout = fit(["Module", "MACs", "MACs %"], [["layer1", "1.81 GMac", "100.00%"]], 30)
    >>> layout.headers, layout.dropped
    (['Module', 'MACs'], ['MACs %'])
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rich.cells import cell_len

# columns of words rather than numbers: they may be cut (with an ellipsis) to fit; shapes are
# numbers too (a cut shape is a wrong shape), so they are dropped whole rather than cut
TEXT_COLUMNS = frozenset({"Module", "Type", "Node", "Op", "Scope"})
SHORT_HEADERS = {"Bytes read": "Read", "Bytes written": "Written", "Bytes R/W": "R/W",
                 "Bwd MACs": "Bwd MAC", "Bwd FLOPs": "Bwd FLOP", "Out bytes": "Out B",
                 "Input shape": "In shape", "Output shape": "Out shape"}
SHARE_SUFFIX = " %"
# dropped in this order when cutting the secondary text is not enough
SECONDARY = ("Scope", "Input shape", "FLOP/s", "FLOP/B", "Output shape", "Bytes R/W", "Bytes read",
             "Bytes written", "Out bytes", "Type", "Bwd FLOPs", "Calls", "Op")
MIN_TEXT_WIDTH = 8    # a cut text column still shows this many cells ("└ layer…")


@dataclass
class Layout:
    """The columns to show (indices into the full table), their headers, the widths the text
    columns are cut to (column index -> cells), and the headers of the columns left out."""

    columns: list
    headers: list
    max_widths: dict = field(default_factory=dict)
    dropped: list = field(default_factory=list)


def table_width(widths: list) -> int:
    """Cells a rich table with these column widths takes: one space of padding either side of
    each column and a border between and around them."""
    return sum(w + 2 for w in widths) + len(widths) + 1


def _natural(headers: list, body: list, columns: list) -> list:
    return [max([cell_len(headers[k])] + [cell_len(row[i]) for row in body]) for k, i in enumerate(columns)]


def _layout(headers: list, columns: list, names: list, cut: dict | None = None) -> Layout:
    dropped = [h for i, h in enumerate(headers) if i not in columns]
    return Layout(columns, names, cut or {}, dropped)


def fit(headers: list, body: list, width: int | None) -> Layout:
    """The fullest layout of ``headers``/``body`` (strings) no wider than ``width`` cells (the
    narrowest one tried when none fits)."""
    every = list(range(len(headers)))
    if width is None:
        return _layout(headers, every, list(headers))
    no_shares = [i for i in every if not headers[i].endswith(SHARE_SUFFIX)]
    for columns, names in ((every, list(headers)), (no_shares, [headers[i] for i in no_shares])):
        if table_width(_natural(names, body, columns)) <= width:
            return _layout(headers, columns, names)
    columns = no_shares
    dropped = []
    for drop in (None,) + SECONDARY:
        if drop is not None:
            if len(columns) <= 2 or drop not in (headers[i] for i in columns[1:]):
                continue
            dropped.append(next(i for i in columns[1:] if headers[i] == drop))
            columns = [i for i in columns if i not in dropped]
        layout = _shortened(headers, body, columns, width)
        if layout is not None:
            # a column dropped early may fit again beside the narrower set: give it back
            for i in reversed(dropped):
                wider = _shortened(headers, body, sorted(layout.columns + [i]), width)
                layout = wider or layout
            return layout
    # nothing secondary left to give: the names are cut too
    names = [SHORT_HEADERS.get(headers[i], headers[i]) for i in columns]
    natural = _natural(names, body, columns)
    widths = _cut_text([headers[i] in TEXT_COLUMNS for i in columns], names, natural, width)
    return _layout(headers, columns, names, _cuts(columns, widths, natural))


def _shortened(headers: list, body: list, columns: list, width: int) -> Layout | None:
    """``columns`` under short headers, the secondary text cut if need be (never the first
    column, the names a reader copies); None when they do not fit in ``width``."""
    names = [SHORT_HEADERS.get(headers[i], headers[i]) for i in columns]
    natural = _natural(names, body, columns)
    if table_width(natural) <= width:
        return _layout(headers, columns, names)
    cuttable = [k > 0 and headers[i] in TEXT_COLUMNS for k, i in enumerate(columns)]
    widths = _cut_text(cuttable, names, natural, width)
    if table_width(widths) <= width:
        return _layout(headers, columns, names, _cuts(columns, widths, natural))
    return None


def _cuts(columns: list, widths: list, natural: list) -> dict:
    return {columns[k]: w for k, w in enumerate(widths) if w < natural[k]}


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
