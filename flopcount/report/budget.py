"""Cost budgets and baselines: what ``flopcount check`` holds a model to.

Only exact, deterministic metrics are gated (counts and predicted bytes), never a measured time:
a gate on wall-clock time fails a pull request because the CI machine was busy. A budget is a set
of upper limits; a baseline is a previous run's metrics, and a regression is a metric that grew
by more than a tolerance.

    >>> budget = Budget({"macs": 4.2e9, "params": 26e6})
    >>> [c.line for c in budget.check({"macs": 4.09e9, "params": 25.56e6}) if not c.ok]
    []
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from typing import Callable

from ..runtime.errors import FlopcountError
from .units import bytes_to_string, flops_to_string, macs_to_string, params_to_string, parse_quantity

if sys.version_info >= (3, 11):
    import tomllib
else:  # the same parser, before it joined the standard library
    import tomli as tomllib


class BudgetError(FlopcountError):
    """A budget or baseline file that cannot be used, or a limit that is not a quantity."""


@dataclass(frozen=True)
class Metric:
    """One gated quantity of a report: its name in files and options, whether it is a count
    or bytes (how limits are written), how it prints, and how it is read off a report."""

    name: str
    kind: str                      # "count" or "bytes"
    text: Callable[[float], str]
    read: Callable[[object], float | None]
    help: str


def _peak(report) -> int | None:
    m = report.memory
    return None if m.predicted_peak is None else m.parameter_bytes + m.buffer_bytes + m.predicted_peak


METRICS = {m.name: m for m in [
    Metric("macs", "count", macs_to_string, lambda r: r.totals["macs"], "multiply-accumulates of a forward pass"),
    Metric("flops", "count", flops_to_string, lambda r: r.totals["flops"], "FLOPs of a forward pass"),
    Metric("params", "count", lambda v: params_to_string(v).strip(), lambda r: r.totals["params"], "parameters"),
    Metric("parameter-bytes", "bytes", bytes_to_string, lambda r: r.memory.parameter_bytes,
           "the parameters' size in memory (the weights' dtype or format)"),
    Metric("peak-memory", "bytes", bytes_to_string, _peak,
           "predicted inference peak: parameters, buffers and the activations alive at once"),
    Metric("peak-activations", "bytes", bytes_to_string, lambda r: r.memory.predicted_peak,
           "predicted peak of the activations alive at once"),
    Metric("bytes-read", "bytes", bytes_to_string, lambda r: r.totals["bytes_read"], "bytes the ops read"),
    Metric("bytes-written", "bytes", bytes_to_string, lambda r: r.totals["bytes_written"], "bytes the ops write"),
]}


def metrics_of(report) -> dict:
    """{metric name: value} of a report, for every metric the report has."""
    values = {name: m.read(report) for name, m in METRICS.items()}
    return {name: value for name, value in values.items() if value is not None}


def _metric(name: str, where: str) -> Metric:
    key = name.replace("_", "-")
    if key not in METRICS:
        raise BudgetError(f"{where}: unknown metric {name!r}; the metrics are {', '.join(METRICS)}")
    return METRICS[key]


def parse_limit(metric: str, value, where: str) -> float:
    """A limit as written (``"4.2G"``, ``"120MB"``, ``26e6``) -> a number."""
    m = _metric(metric, where)
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise BudgetError(f"{where}: {m.name} must be a number or a quantity such as 4.2G or 120MB, got {value!r}")
    try:
        number = float(value) if not isinstance(value, str) else parse_quantity(value, m.kind)
    except ValueError as exc:
        raise BudgetError(f"{where}: {m.name}: {exc}") from None
    if not number >= 0 or number == float("inf"):
        raise BudgetError(f"{where}: {m.name} must be a finite number >= 0, got {value!r}")
    return number


def parse_tolerance(text: str) -> float:
    """``"1%"``, ``"0.5 %"`` or ``"0.01"`` -> a fraction (0.01)."""
    raw = str(text).strip()
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        raise BudgetError(f"tolerance {text!r} is not a fraction such as 1% or 0.01") from None
    if not 0 <= value < float("inf"):
        raise BudgetError(f"tolerance {text!r} must be >= 0")
    return value


@dataclass(frozen=True)
class Check:
    """One metric held to one limit."""

    metric: str
    value: float
    limit: float
    against: str                   # "budget" or "baseline"
    tolerance: float = 0.0

    @property
    def ok(self) -> bool:
        return self.value <= self.limit * (1 + self.tolerance)

    @property
    def line(self) -> str:
        m = METRICS[self.metric]
        excess = self.value - self.limit
        change = f"{excess / self.limit:+.2%}" if self.limit else "from 0"
        if self.against == "budget":
            relation = "over" if not self.ok else "within"
            return (f"{m.name} {m.text(self.value)} {relation} its budget {m.text(self.limit)}"
                    + (f" by {m.text(excess)} ({change})" if not self.ok else ""))
        tolerance = f", tolerance {self.tolerance:.2%}" if self.tolerance else ""
        sign = "+" if excess >= 0 else "-"
        return (f"{m.name} {m.text(self.value)} against the baseline's {m.text(self.limit)}: "
                f"{sign}{m.text(abs(excess))} ({change}{tolerance})")


@dataclass(frozen=True)
class Budget:
    """Upper limits by metric name: ``Budget({"macs": 4.2e9})``."""

    limits: dict

    @classmethod
    def parse(cls, limits: dict, where: str) -> "Budget":
        """Limits as written in a file or on the command line (``{"max-macs": "4.2G"}``)."""
        parsed = {}
        for key, value in limits.items():
            name = key.removeprefix("max-").removeprefix("max_")
            parsed[_metric(name, where).name] = parse_limit(name, value, where)
        return cls(parsed)

    @classmethod
    def read(cls, path: str) -> "Budget":
        """A TOML file whose ``[budget]`` table holds the limits::

            [budget]
            max-macs = "4.2G"
            max-params = "26M"
            max-peak-memory = "120MB"
        """
        try:
            with open(path, "rb") as f:
                data = tomllib.load(f)
        except tomllib.TOMLDecodeError as exc:
            raise BudgetError(f"{path}: not a TOML file ({exc})") from None
        except UnicodeDecodeError:
            raise BudgetError(f"{path}: not a TOML file (not UTF-8 text)") from None
        if set(data) != {"budget"} or not isinstance(data["budget"], dict):
            raise BudgetError(f"{path}: expected one [budget] table of limits (max-macs = \"4.2G\" ...), "
                              f"found {', '.join(sorted(data)) or 'nothing'}")
        if not data["budget"]:
            raise BudgetError(f"{path}: the [budget] table has no limits")
        return cls.parse(data["budget"], path)

    def check(self, values: dict) -> list:
        """A :class:`Check` per limit; a metric the report lacks is a BudgetError."""
        missing = [name for name in self.limits if name not in values]
        if missing:
            raise BudgetError(f"the report has no {', '.join(missing)} to hold to the budget")
        return [Check(name, values[name], limit, "budget") for name, limit in self.limits.items()]


BASELINE_KIND = "flopcount-baseline"


def baseline_text(model: str, values: dict) -> str:
    """A baseline file's JSON: the model and its metrics."""
    return json.dumps({"kind": BASELINE_KIND, "version": 1, "model": model, "metrics": values}, indent=2) + "\n"


def read_baseline(path: str) -> dict:
    """{metric: value} of a baseline written by ``flopcount check --update``, or of a report
    written by ``flopcount MODEL --format json``."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
        raise BudgetError(f"{path}: not a JSON baseline (write one with flopcount check MODEL --baseline "
                          f"{os.path.basename(path)} --update)") from None
    if isinstance(data, dict) and data.get("kind") == BASELINE_KIND and isinstance(data.get("metrics"), dict):
        values = data["metrics"]
    elif isinstance(data, dict) and isinstance(data.get("totals"), dict) and isinstance(data.get("memory"), dict):
        values = _report_json_metrics(data)
    else:
        raise BudgetError(f"{path}: not a baseline (neither flopcount check --update's file nor a report's JSON)")
    for name, value in values.items():
        if name not in METRICS or isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise BudgetError(f"{path}: metric {name!r} = {value!r} is not a known metric with a number >= 0")
    return values


def _report_json_metrics(data: dict) -> dict:
    t, m = data["totals"], data["memory"]
    values = {"macs": t.get("macs"), "flops": t.get("flops"), "params": t.get("params"),
              "parameter-bytes": m.get("parameter_bytes"), "peak-activations": m.get("predicted_peak"),
              "bytes-read": t.get("bytes_read"), "bytes-written": t.get("bytes_written")}
    if m.get("predicted_peak") is not None:
        values["peak-memory"] = m["parameter_bytes"] + m["buffer_bytes"] + m["predicted_peak"]
    return {k: v for k, v in values.items() if v is not None}


def against_baseline(values: dict, baseline: dict, tolerance: float) -> list:
    """A :class:`Check` per metric both have: growth beyond ``tolerance`` fails."""
    return [Check(name, values[name], baseline[name], "baseline", tolerance) for name in baseline if name in values]
