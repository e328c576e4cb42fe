"""A report's rooflines on a hardware profile: per op, then summed per row.

Each forward op record is priced by ``hardware.roofline`` with MACs in the dtype they run in
(``OpRecord.mac_dtype``, else ``hardware.compute_dtype`` of its inputs). A row (module, scope, or the graph node of the same
name) gets the sum of the rooflines of the ops under it: ops run one after another, each bound
by its own resource, so a layer's best time is the sum, not the roofline of its summed counts.
Its ``bound`` is the kind of op that holds most of that time.
"""

from __future__ import annotations

from .. import hardware as _hw
from ..hardware.calibrated import predict
from .sums import scope_prefixes


def add_roofline(report, profile) -> None:
    """Set ``roofline_ms`` and ``bound`` on every forward op record and every row of ``report``,
    and ``report.hardware`` to the profile (a Profile or a name). A calibrated profile also sets
    ``predicted_ms``: each op's time read off the calibration's curve for its class, summed per
    row like the rooflines."""
    profile = _hw.get(profile)
    by_scope: dict = {}     # scope -> [compute-bound seconds, memory-bound seconds, predicted seconds]
    by_record: dict = {}
    for record in report.by_op("forward"):
        r = _hw.roofline(record, profile, record.mac_dtype or _hw.compute_dtype(record.input_dtypes))
        record.roofline_ms, record.bound = r.time_s * 1e3, r.bound
        predicted = predict(profile, record.op, r.time_s, record.input_shapes)
        record.predicted_ms = None if predicted is None else predicted * 1e3
        by_record[record.name] = record
        slot = 0 if r.bound == "compute" else 1
        for prefix in scope_prefixes(record.scope):
            times = by_scope.setdefault(prefix, [0.0, 0.0, 0.0])
            times[slot] += r.time_s
            times[2] += predicted or 0.0
    for row in report.rows:
        record = by_record.get(row.name) if row.kind == "op" else None
        if record is not None:
            row.roofline_ms, row.bound, row.predicted_ms = record.roofline_ms, record.bound, record.predicted_ms
            continue
        compute_s, memory_s, predicted_s = by_scope.get(row.name, (0.0, 0.0, 0.0))
        row.predicted_ms = predicted_s * 1e3 if profile.curves else None
        row.roofline_ms = (compute_s + memory_s) * 1e3
        row.bound = None if compute_s + memory_s == 0 else ("compute" if compute_s > memory_s else "memory")
    report.hardware = profile
