"""Two reports layer by layer and op by op: which rows were added, removed or changed, and by
how much (MACs, FLOPs, params, bytes moved, latency), with the totals.

Rows are matched in two passes. First by name: layers by their module path, ops within the same
scope by their op type in order (a quantized Conv keeps its node name; a fused block keeps its
path). Then what is left on either side is aligned by position and type (``difflib``'s longest
matching runs over the sequence of types), so a renamed layer still pairs with its counterpart.
Rows left over are ``added`` (only in B) or ``removed`` (only in A).

    >>> import flopcount
    >>> a, b = flopcount.profile("resnet50"), flopcount.profile("resnet50", input_shape=(1, 3, 256, 256))  # doctest: +SKIP
    >>> d = flopcount.diff(a, b)                                                                          # doctest: +SKIP
    >>> d.totals["macs"]                                                                                   # doctest: +SKIP
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field

from .units import bytes_to_string, flops_to_string, macs_to_string, params_to_string, time_to_string

BY = ("layer", "op")
STATUSES = ("changed", "added", "removed", "same")
MEASURES = ("macs", "flops", "params", "bytes", "latency_ms")


@dataclass
class Item:
    """One row of either side, in the terms a diff compares."""

    name: str
    kind: str          # module type (layers) or op name (ops)
    group: str         # what names are matched within: '' for layers, the scope for ops
    macs: int = 0
    flops: int = 0
    params: int = 0
    bytes: int = 0
    latency_ms: float | None = None


@dataclass
class DiffRow:
    """A matched pair (``a`` and ``b``), or a row on one side only."""

    status: str
    a: Item | None
    b: Item | None
    matched_by: str = ""  # "name" or "position"

    def value(self, side: str, measure: str):
        item = self.a if side == "a" else self.b
        return None if item is None else getattr(item, measure)

    def delta(self, measure: str):
        a, b = self.value("a", measure), self.value("b", measure)
        if measure == "latency_ms" and (a is None and b is None):
            return None
        return (b or 0) - (a or 0)

    def to_dict(self) -> dict:
        out = {"status": self.status, "matched_by": self.matched_by,
               "name_a": self.a.name if self.a else None, "name_b": self.b.name if self.b else None,
               "type": (self.b or self.a).kind}
        for m in MEASURES:
            out[f"{m}_a"], out[f"{m}_b"], out[f"{m}_delta"] = self.value("a", m), self.value("b", m), self.delta(m)
        return out


@dataclass
class Diff:
    """The comparison of two reports (see the module docstring)."""

    a: object
    b: object
    by: str
    rows: list = field(default_factory=list)

    @property
    def totals(self) -> dict:
        """{measure: (A, B, B - A)} for the whole models."""
        ta, tb = _totals(self.a), _totals(self.b)
        out = {}
        for m in MEASURES:
            delta = None if ta[m] is None or tb[m] is None else tb[m] - ta[m]
            out[m] = (ta[m], tb[m], delta)
        return out

    def count(self, status: str) -> int:
        return sum(1 for r in self.rows if r.status == status)

    def to_dict(self) -> dict:
        return {"by": self.by, "a": self.a.model or self.a.root.type, "b": self.b.model or self.b.root.type,
                "totals": {m: {"a": a, "b": b, "delta": d} for m, (a, b, d) in self.totals.items()},
                "counts": {s: self.count(s) for s in STATUSES},
                "rows": [r.to_dict() for r in self.rows]}

    def cells(self, every: bool = False) -> tuple:
        """(headers, rows of strings): changed, added and removed rows (``every``: also the
        rows that are the same)."""
        timed = self.a.latency_ms is not None or self.b.latency_ms is not None
        headers = ["", "A", "B", "Type", "MACs A", "MACs B", "Δ MACs", "Δ Params", "Δ Bytes"]
        if timed:
            headers.append("Δ Latency")
        body = []
        for r in self.rows:
            if r.status == "same" and not every:
                continue
            cells = [_MARKS[r.status], r.a.name if r.a else "", r.b.name if r.b else "", (r.b or r.a).kind,
                     _or_dash(r.value("a", "macs"), macs_to_string), _or_dash(r.value("b", "macs"), macs_to_string),
                     _signed(r.delta("macs"), macs_to_string), _signed(r.delta("params"), params_to_string),
                     _signed(r.delta("bytes"), bytes_to_string)]
            if timed:
                cells.append(_signed(r.delta("latency_ms"), time_to_string))
            body.append(cells)
        return headers, body

    def footer(self) -> list:
        t = self.totals
        label_a, label_b = self.a.model or self.a.root.type, self.b.model or self.b.root.type
        lines = [f"A: {label_a} | B: {label_b} | by {self.by} | "
                 + ", ".join(f"{self.count(s)} {s}" for s in STATUSES)]
        for m, text in (("macs", macs_to_string), ("flops", flops_to_string), ("params", params_to_string),
                        ("bytes", bytes_to_string), ("latency_ms", time_to_string)):
            a, b, d = t[m]
            if a is None and b is None:
                continue
            lines.append(f"total {m.replace('_ms', '')}: {_or_dash(a, text)} -> {_or_dash(b, text)} "
                         f"({_signed(d, text)}{_ratio(a, b)})")
        lines.append("+ only in B, - only in A, ~ changed; rows matched by name, then by position and type")
        return lines


_MARKS = {"changed": "~", "added": "+", "removed": "-", "same": "="}


def _or_dash(value, text) -> str:
    return "-" if value is None else text(value)


def _signed(value, text) -> str:
    if value is None:
        return "-"
    if value == 0:
        return "0"
    return ("+" if value > 0 else "-") + text(abs(value))


def _ratio(a, b) -> str:
    return f", x{b / a:.3f}" if a and b is not None else ""


def _totals(report) -> dict:
    r = report.root
    return {"macs": r.macs, "flops": r.flops, "params": r.params, "bytes": r.bytes_read + r.bytes_written,
            "latency_ms": report.latency_ms}


def _layer_items(report) -> list:
    """Every layer (module or scope row, not the root nor single ops), in tree order."""
    return [Item(r.name, r.type, "", r.macs, r.flops, r.params, r.bytes_read + r.bytes_written, r.latency_ms)
            for r in report.rows if r.name != "" and r.kind != "op"]


def _op_items(report) -> list:
    """Every forward op, in execution order, grouped by its scope."""
    return [Item(o.name, o.op, o.scope, o.macs, o.flops, o.params, o.bytes_read + o.bytes_written, o.latency_ms)
            for o in report.by_op("forward")]


def _align(left: list, right: list, key) -> list:
    """(i, j) pairs of ``left`` and ``right`` indices whose ``key`` agree, in order: the longest
    matching runs (difflib), so an insertion shifts nothing after it."""
    matcher = difflib.SequenceMatcher(None, [key(x) for x in left], [key(x) for x in right], autojunk=False)
    return [(block.a + k, block.b + k) for block in matcher.get_matching_blocks() for k in range(block.size)]


def _match(a_items: list, b_items: list, by: str) -> list:
    pairs = {}
    # 1. by name: a layer by its path; ops within the same scope by type in order
    if by == "layer":
        b_index = {x.name: j for j, x in enumerate(b_items)}
        for i, x in enumerate(a_items):
            j = b_index.get(x.name)
            if j is not None:
                pairs[i] = (j, "name")
    else:
        groups_a, groups_b = {}, {}
        for i, x in enumerate(a_items):
            groups_a.setdefault(x.group, []).append(i)
        for j, x in enumerate(b_items):
            groups_b.setdefault(x.group, []).append(j)
        for group, left in groups_a.items():
            right = groups_b.get(group, [])
            for p, q in _align([a_items[i] for i in left], [b_items[j] for j in right], lambda x: x.kind):
                pairs[left[p]] = (right[q], "name")
    # 2. what is left, by position and type
    taken = {j for j, _ in pairs.values()}
    left = [i for i in range(len(a_items)) if i not in pairs]
    right = [j for j in range(len(b_items)) if j not in taken]
    for p, q in _align([a_items[i] for i in left], [b_items[j] for j in right], lambda x: x.kind):
        pairs[left[p]] = (right[q], "position")
    return _ordered(a_items, b_items, pairs)


def _ordered(a_items: list, b_items: list, pairs: dict) -> list:
    """Diff rows in B's order, each removed row placed after the A row before it."""
    a_of = {j: (i, how) for i, (j, how) in pairs.items()}
    rows, placed = [], set()

    def flush_removed(up_to: int) -> None:
        for i in range(up_to + 1):
            if i not in pairs and i not in placed:
                placed.add(i)
                rows.append(DiffRow("removed", a_items[i], None))

    for j, b in enumerate(b_items):
        if j in a_of:
            i, how = a_of[j]
            flush_removed(i)
            a = a_items[i]
            same = all(getattr(a, m) == getattr(b, m) for m in ("macs", "flops", "params", "bytes", "kind"))
            rows.append(DiffRow("same" if same else "changed", a, b, how))
        else:
            rows.append(DiffRow("added", None, b))
    flush_removed(len(a_items) - 1)
    return rows


def diff(a, b, by: str = "layer") -> Diff:
    """Compare report ``b`` against report ``a`` layer by layer (``by="layer"``) or op by op
    (``by="op"``); see the module docstring."""
    if by not in BY:
        raise ValueError(f"diff by {by!r}: choose one of {', '.join(BY)}")
    items = _layer_items if by == "layer" else _op_items
    return Diff(a, b, by, _match(items(a), items(b), by))
