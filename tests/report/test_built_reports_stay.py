"""A built Report is never changed: pricing it on hardware, timing it on an engine or replacing
its notes returns a new report, and the one given reads as it did (its whole JSON export)."""

from __future__ import annotations

import json

import pytest

import flopcount
import flopcount.runtime as rt
from flopcount import hardware


def _net():
    return rt.nn.Sequential(rt.nn.Linear(3, 8), rt.nn.ReLU(), rt.nn.Linear(8, 2))


def _exported(report) -> str:
    return json.dumps(report.to_dict(), sort_keys=True, default=str)


@pytest.mark.parametrize("mode", ["graph", "eager"])
def test_with_hardware_prices_a_copy(mode):
    report = flopcount.profile(_net(), rt.ones(4, 3), mode=mode)
    before = _exported(report)
    priced = report.with_hardware("a100-80gb")
    assert _exported(report) == before
    assert report.hardware is None and "roofline_ms" not in report.totals
    assert all(o.roofline_ms is None for o in report.ops) and report.root.roofline_ms is None
    # the copy's root is the sum of its forward ops' rooflines, each priced on the profile given
    a100 = hardware.get("a100-80gb")
    ops = priced.by_op("forward")
    expected = [hardware.roofline(o, a100, o.mac_dtype or hardware.compute_dtype(o.input_dtypes)).time_s * 1e3
                for o in ops]
    assert [o.roofline_ms for o in ops] == pytest.approx(expected)
    assert priced.totals["roofline_ms"] == pytest.approx(sum(expected))
    assert (priced.macs, priced.params, priced.notes) == (report.macs, report.params, report.notes)


def test_with_replaces_attributes_on_a_copy_and_names_unknown_ones():
    report = flopcount.profile(_net(), rt.ones(4, 3))
    before = _exported(report)
    noted = report.with_(notes=report.notes + ["checked"])
    assert noted.notes[-1] == "checked" and _exported(report) == before
    assert noted.rows is report.rows   # nothing changes rows once built: the copy shares them
    assert all(r.name in report for r in report.rows)   # the rows by name, made now
    root_only = report.with_(rows=report.rows[:1])
    assert "" in root_only and not any(r.name in root_only for r in report.rows[1:])
    with pytest.raises(AttributeError, match="Report has no attribute 'latency' to replace"):
        report.with_(latency=1.0)


def test_a_copy_has_records_of_its_own_built_once():
    report = flopcount.profile(_net(), rt.ones(4, 3), mode="eager")
    copied = report.copy()
    assert [o.to_dict() for o in copied.ops] == [o.to_dict() for o in report.ops]
    assert not {id(o) for o in copied.ops} & {id(o) for o in report.ops}
    assert not {id(r) for r in copied.rows} & {id(r) for r in report.rows}
    assert copied.ops is copied.ops   # built on the first read, then kept


def test_an_engine_run_times_a_copy():
    torch = pytest.importorskip("torch")
    from flopcount import loading
    from flopcount.api import run_engine

    model, x = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.ReLU()).eval(), torch.randn(4, 3)
    report = flopcount.profile(model, x)
    before = _exported(report)
    target = loading.specialize(loading.load(model), examples=((x,), {}))
    timed = run_engine(report, "torch", target, warmup=0, repeat=1)
    assert _exported(report) == before
    assert (report.engine, report.latency_ms, report.root.latency_ms) == ("flopcount", None, None)
    assert timed.engine == "torch" and timed.latency_ms > 0 and timed.root.latency_ms > 0
    assert run_engine(report, "flopcount", target, warmup=0, repeat=1) is report
