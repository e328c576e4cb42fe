"""Adding rows up: the count fields every row and op record has, and how one is added into another."""

from __future__ import annotations

from .shared import has_own_macs

COST_FIELDS = ("macs", "flops", "bytes_read", "bytes_written")


def accumulate(total, part, counts: tuple = COST_FIELDS, times: tuple = ()) -> None:
    """Add ``part``'s ``counts`` into ``total`` (rows, op records, summaries alike), and each of
    its ``times`` that was measured: a total stays None until some part has a time.

    >>> a, b = Row("a", "A", macs=2), Row("b", "B", macs=3, latency_ms=1.5)
    >>> accumulate(a, b, times=("latency_ms",))
    >>> a.macs, a.latency_ms
    (5, 1.5)
    """
    for name in counts:
        setattr(total, name, getattr(total, name) + getattr(part, name))
    for name in times:
        value = getattr(part, name)
        if value is not None:
            setattr(total, name, (getattr(total, name) or 0.0) + value)


def scope_prefixes(scope: str) -> list:
    """The rows an op of ``scope`` is summed into: the model's ('') and every dotted prefix.

    >>> scope_prefixes("a.b")
    ['', 'a', 'a.b']
    """
    parts = scope.split(".") if scope else []
    return [""] + [".".join(parts[: i + 1]) for i in range(len(parts))]


def add_macs(by_dtype: dict, dtype: str | None, macs: int) -> None:
    """Add ``macs`` run in ``dtype`` to a ``macs_by_dtype`` dict (nothing for zero MACs)."""
    if macs:
        by_dtype[dtype] = by_dtype.get(dtype, 0) + macs


def add_macs_to(row, dtype: str | None, macs: int) -> None:
    """Add ``macs`` run in ``dtype`` to a row's ``macs_by_dtype``, giving the row a dict of its
    own first if it still shares the empty one (nothing for zero MACs)."""
    if macs:
        if not has_own_macs(row.macs_by_dtype):
            row.macs_by_dtype = {}
        add_macs(row.macs_by_dtype, dtype, macs)


def add_macs_of(total, part) -> None:
    """Add ``part``'s MACs by dtype into ``total``'s (rows alike)."""
    for dtype, macs in part.macs_by_dtype.items():
        add_macs_to(total, dtype, macs)


__all__ = ["COST_FIELDS", "accumulate", "add_macs", "add_macs_of", "add_macs_to", "scope_prefixes"]
