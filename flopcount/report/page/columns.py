"""Records as columns, for the page's embedded data: one list per field instead of one object
per record, and a field whose values repeat (op types, scopes, shapes, dtypes) as its distinct
values plus an index per record. A 7B decoder's thousands of ops repeat a few dozen shapes; in
columns its report is a fraction of the JSON report's size.

    >>> ops = [{"op": "conv", "macs": 4}, {"op": "relu", "macs": 0}, {"op": "conv", "macs": 8}, {"op": "relu"}]
    >>> pack(ops, ["op", "macs", "latency_ms"])
    {'n': 4, 'c': {'op': {'d': ['conv', 'relu'], 'i': [0, 1, 0, 1]}, 'macs': [4, 0, 8, None]}}
"""

from __future__ import annotations

import json


def _key(value) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def column(values: list):
    """``values`` as they are, or ``{"d": distinct, "i": index per value}`` when that is
    shorter (at most half as many distinct values as values)."""
    distinct: dict = {}
    for value in values:
        distinct.setdefault(_key(value), value)
        if len(distinct) * 2 > len(values):
            return values
    if len(values) < 4:
        return values
    order = {k: i for i, k in enumerate(distinct)}
    return {"d": list(distinct.values()), "i": [order[_key(v)] for v in values]}


def pack(records: list, fields: list) -> dict:
    """``{"n": len(records), "c": {field: column}}`` for the ``fields`` that have a value
    other than None in some record (a report without latency carries no latency column)."""
    out = {}
    for name in fields:
        values = [r.get(name) for r in records]
        if any(v is not None for v in values):
            out[name] = column(values)
    return {"n": len(records), "c": out}


__all__ = ["column", "pack"]
