"""What a reader of a report's numbers should be told: spread-out timings, training-mode counts.

    >>> from flopcount.report.model import Report, Row
    >>> report = Report([Row("", "Net")], convention="flopcount", mode="graph", device="cpu",
    ...                 latency_ms=1028.0, latency_min_ms=213.0)
    >>> report_warnings(report)[0][:60]
    'timings spread widely: median 1.03 s, fastest 213 ms (4.8x);'
"""

from __future__ import annotations

from .units import time_to_string

# the median more than this many times the fastest run: something else had the machine
SPREAD_LIMIT = 1.5


def _spread(median: float | None, fastest: float | None) -> float | None:
    return median / fastest if median and fastest else None


def report_warnings(report) -> list:
    """One line per warning (none for a clean report)."""
    out = []
    spread = _spread(report.latency_ms, report.latency_min_ms)
    if spread is not None and spread > SPREAD_LIMIT:
        out.append(f"timings spread widely: median {time_to_string(report.latency_ms)}, fastest "
                   f"{time_to_string(report.latency_min_ms)} ({spread:.1f}x); the machine was busy, so "
                   f"latencies are unreliable: rerun on an idle machine or with more --repeat"
                   + (" (or fewer --threads)" if report.threads is not None else ""))
    if report.backward and _has_batch_norm(report):
        out.append("backward=True profiles a training step: BatchNorm layers use batch statistics and update "
                   "their running statistics, so the forward counts differ from an inference profile")
    return out


def _has_batch_norm(report) -> bool:
    return (any("BatchNorm" in r.type for r in report.rows)
            or any(o.op == "batch_norm" for o in report.ops if o.phase == "forward"))
