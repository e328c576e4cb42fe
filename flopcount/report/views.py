"""Views of a report that renderers share: the tree walk (depth limit, sort, top-k) and the
op-type summary (fvcore's ``by_operator``)."""

from __future__ import annotations

from dataclasses import dataclass, fields

from ..runtime.errors import FlopcountError
from .sums import accumulate

SORT_KEYS = {"macs": "macs", "flops": "flops", "params": "params", "latency": "latency_ms",
             "memory": "output_bytes"}
VIEWS = ("module", "op-type", "op")


def sort_attribute(sort: str | None) -> str | None:
    """The Row attribute behind a sort key (macs|flops|params|latency|memory)."""
    if sort is None:
        return None
    try:
        return SORT_KEYS[sort]
    except KeyError:
        raise ValueError(f"unknown sort key {sort!r}; choose one of {', '.join(SORT_KEYS)}") from None


def check_sort(report, sort: str | None) -> None:
    """A sort key the report can honour: ``latency`` needs measured times."""
    sort_attribute(sort)
    if sort == "latency" and report.latency_ms is None:
        raise FlopcountError("sort by latency: this report has no measured latency "
                             "(profile with latency=True, or --latency on the command line)")


def _key(row, attr: str) -> float:
    value = getattr(row, attr)
    return -1.0 if value is None else value


def _echo(report, row):
    """The only child of ``row`` when it is the one op the module ran: that op row repeats the
    module's numbers, so views fold it into the module."""
    kids = report.children(row.name)
    if row.kind != "op" and len(kids) == 1:
        only = kids[0]
        if only.kind == "op" and (only.macs, only.flops, only.params) == (row.macs, row.flops, row.params):
            return only
    return None


def _children(report, row) -> list:
    return [] if _echo(report, row) is not None else report.children(row.name)


def tree_rows(report, depth: int | None = None, top: int | None = None, sort: str | None = None) -> list:
    """(row, indent) pairs to display.

    The tree is walked depth-first from the root down to ``depth`` (the root is depth 0);
    ``sort`` orders siblings, largest first. With ``top`` the view is flat: the ``top`` rows with
    the largest sort key (MACs by default) among the rows that have no children shown at that
    depth — the most expensive layers, not their containers. A module whose only child is the
    one op it ran shows as one row (``conv1 Conv2d``, not also ``conv1.conv conv``).
    """
    attr = sort_attribute(sort)
    limit = float("inf") if depth is None else depth
    if top is not None:
        attr = attr or "macs"
        echoes = {id(e) for e in (_echo(report, r) for r in report.rows) if e is not None}
        shown = [r for r in report.rows if r.depth <= limit and id(r) not in echoes]
        leaves = [r for r in shown if r.depth == limit or not _children(report, r)]
        leaves.sort(key=lambda r: _key(r, attr), reverse=True)
        return [(r, 0) for r in leaves[:top]]
    out = []
    stack = [report.root]
    while stack:
        row = stack.pop()
        out.append((row, row.depth))
        if row.depth >= limit:
            continue
        kids = _children(report, row)
        if attr is not None:
            kids = sorted(kids, key=lambda r: _key(r, attr), reverse=True)
        stack.extend(reversed(kids))
    return out


@dataclass
class OpTypeSummary:
    """All calls of one op type: counts, cost and measured time."""

    op: str
    calls: int = 0
    macs: int = 0
    flops: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    counted_calls: int = 0
    latency_ms: float | None = None
    roofline_ms: float | None = None  # with a hardware profile: the sum of its calls' rooflines

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def by_op_type(report, phase: str | None = "forward") -> list:
    """One :class:`OpTypeSummary` per op name, sorted by FLOPs then MACs (largest first)."""
    table: dict = {}
    for rec in report.ops:
        if phase is not None and rec.phase != phase:
            continue
        s = table.get(rec.op)
        if s is None:
            s = table[rec.op] = OpTypeSummary(rec.op)
        s.calls += 1
        s.counted_calls += 1 if rec.counted else 0
        accumulate(s, rec, times=("latency_ms", "roofline_ms"))
    return sorted(table.values(), key=lambda s: (s.flops, s.macs, s.calls), reverse=True)
