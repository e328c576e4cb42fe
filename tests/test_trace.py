"""The Chrome trace is a timeline: op slices inside module slices inside their parents, the
forward and backward passes on their own named threads, one after the other."""

import json

import pytest

import flopcount
import flopcount.runtime as rt

nn = rt.nn
EPS = 1e-6  # microseconds: ts and dur are integer nanoseconds written in µs


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)

    def forward(self, x):
        return (self.bn(self.conv(x)) + x).relu()


def _net():
    return nn.Sequential(nn.Conv2d(3, 4, 3), Block(), Block(), nn.Flatten(), nn.Linear(4 * 6 * 6, 5))


def _slices(trace, tid):
    return [e for e in trace["traceEvents"] if e["ph"] == "X" and e["tid"] == tid]


def _check_nesting(slices):
    """Every slice lies inside its parent's [ts, ts + dur]; siblings do not overlap."""
    modules = [e for e in slices if e["cat"] == "Module"]
    for e in slices:
        path = e["name"] if e["cat"] == "Module" else e["args"]["scope"]
        parent_path = path.rpartition(".")[0] if e["cat"] == "Module" else path
        if not parent_path:
            continue
        parents = [m for m in modules if m["name"] == parent_path and m is not e
                   and m["ts"] - EPS <= e["ts"] <= m["ts"] + m["dur"] + EPS]
        assert parents, f"{e['name']} has no enclosing {parent_path} slice"
        parent = parents[0]
        assert e["ts"] + e["dur"] <= parent["ts"] + parent["dur"] + EPS, (e["name"], parent["name"])
    ops = sorted((e for e in slices if e["cat"] == "Node"), key=lambda e: e["ts"])
    for a, b in zip(ops, ops[1:]):
        assert a["ts"] + a["dur"] <= b["ts"] + EPS  # one op at a time, as they ran


@pytest.mark.parametrize("mode", ["graph", "eager"])
def test_slices_nest_and_passes_are_apart(mode):
    report = flopcount.profile(_net(), rt.randn(2, 3, 8, 8), mode=mode, latency=True, backward=True,
                               repeat=2, warmup=0)
    trace = json.loads(json.dumps(report.chrome_trace()))
    names = {(e["name"], e["tid"]): e["args"] for e in trace["traceEvents"] if e["ph"] == "M"}
    assert names[("thread_name", 1)]["name"] == "forward" and names[("thread_name", 2)]["name"] == "backward"
    assert "flopcount" in names[("process_name", 0)]["name"]
    forward, backward = _slices(trace, 1), _slices(trace, 2)
    _check_nesting(forward)
    _check_nesting(backward)
    assert max(e["ts"] + e["dur"] for e in forward) <= min(e["ts"] for e in backward) + EPS
    # one op slice per forward op record, each as long as its measured time, counts in args
    ops = [e for e in forward if e["cat"] == "Node"]
    records = report.by_op("forward")
    assert len(ops) == len(records)
    for event, rec in zip(ops, records):
        assert event["dur"] == pytest.approx(rec.latency_ms * 1e3, abs=1e-3)
        assert event["args"]["macs"] == rec.macs and event["args"]["flops"] == rec.flops
    # module slices: "1" (the first Block) over "1.conv" over its conv op
    block = next(e for e in forward if e["cat"] == "Module" and e["name"] == "1")
    assert block["args"]["macs"] == report.row("1").macs
    assert any(e["cat"] == "Module" and e["name"] == "1.conv" for e in forward)


def test_without_times_the_trace_is_refused_or_laid_out_by_roofline():
    report = flopcount.profile(_net(), rt.randn(2, 3, 8, 8))
    with pytest.raises(flopcount.FlopcountError, match="a trace needs times"):
        report.chrome_trace()
    report = report.with_hardware("a100-80gb")   # a priced copy
    trace = report.chrome_trace()
    assert "roofline estimate" in trace["otherData"]["times"]
    forward = _slices(trace, 1)
    _check_nesting(forward)
    ops = [e for e in forward if e["cat"] == "Node"]
    assert [e["dur"] for e in ops] == pytest.approx([r.roofline_ms * 1e3 for r in report.by_op("forward")],
                                                    abs=1e-3)
    assert sum(e["dur"] for e in ops) == pytest.approx(report.totals["roofline_ms"] * 1e3, abs=1e-2)
