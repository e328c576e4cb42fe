"""What the tables, footers and files say: each defect a new user met, held down by a test."""

import csv
import io
import json
import time

import pytest

import flopcount
import flopcount.runtime as rt
from flopcount.report import units
from flopcount.report.model import Report, Row

nn = rt.nn


@pytest.fixture(scope="module")
def resnet18():
    return flopcount.profile("resnet18")


def test_top_of_the_op_view_is_the_most_expensive_ops(resnet18):
    text = resnet18.table(by="op", top=6)
    expected = sorted(resnet18.by_op("forward"), key=lambda r: r.macs, reverse=True)[:6]
    shown = [line.split("│")[1].strip() for line in text.splitlines() if line.startswith("│")]
    assert shown == [r.name for r in expected]
    assert all(r.macs > 0 for r in expected)


def test_sorting_by_latency_needs_timings(resnet18):
    with pytest.raises(flopcount.FlopcountError, match="no measured latency"):
        resnet18.table(sort="latency")


def test_macs_and_flops_reach_tera_and_peta():
    assert units.macs_to_string(79_070_350_000_000) == "79.07 TMac"
    assert units.flops_to_string(158_140_700_000_000) == "158.14 TFLOPs"
    assert units.flops_to_string(3.2e15) == "3.2 PFLOPs"


def _timed_step():
    net = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU())
    return flopcount.profile(net, rt.randn(2, 3, 8, 8), latency=True, backward=True, repeat=2, warmup=0)


def test_backward_latency_is_shown_and_the_total_names_the_rows_time():
    report = _timed_step()
    assert report.backward_latency_ms is not None
    text = report.table(width=400)
    assert "Bwd latency" in text
    assert units.time_to_string(report.backward_latency_ms) in text.split("training step:")[1]
    # the footer's total and the model row's time differ (synchronized runs or not): both named
    latency_line = next(line for line in text.splitlines() if line.startswith("latency:"))
    assert units.time_to_string(report.latency_ms) in latency_line
    assert units.time_to_string(report.root.latency_ms) in latency_line.split("layer by layer")[1]


class _SlowInference(nn.Module):
    """A linear layer whose inference calls (no gradient) spin for 50 ms: the forward timed for
    the latency line is far slower than the forward inside a training step, as when the first
    timed forward runs compile kernels. It spins rather than sleeps: on a busy machine the run
    gets one thread, timed by that thread's CPU time (runtime/clock.py), which a sleep does not
    add to."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(64, 64)

    def forward(self, x):
        if not rt.is_grad_enabled():
            end = time.thread_time() + 0.05
            while time.thread_time() < end:
                pass
        return self.fc(x)


@pytest.mark.parametrize("mode", ["eager", "graph"])
def test_the_backward_time_is_measured_not_a_difference_of_two_runs(mode, monkeypatch):
    if mode == "graph":
        # the graph view runs no Python forward: its timed forward is made slow the same way
        from flopcount.graph_parser import execution

        timed = execution.time_graph_and_nodes

        def slow_whole(*args, **kwargs):
            result = timed(*args, **kwargs)
            result["whole"] = tuple(t + 50.0 for t in result["whole"])
            return result

        monkeypatch.setattr(execution, "time_graph_and_nodes", slow_whole)
    report = flopcount.profile(_SlowInference(), rt.randn(8, 64), mode=mode, latency=True, backward=True,
                               repeat=1, warmup=0)
    assert report.latency_ms > 50
    # a step's time less that forward's was max(0, ...) = 0: the backward is timed by itself
    assert 0 < report.backward_latency_ms < report.latency_ms
    assert f"(backward {units.macs_to_string(report.totals['backward_macs'])}, " \
           f"{units.time_to_string(report.backward_latency_ms)})" in report.table(width=400)


def test_an_untimed_backward_says_why():
    net = nn.Sequential(nn.Linear(4, 4))
    report = flopcount.profile(net, rt.randn(2, 4), latency=True, backward=True, repeat=1, warmup=0)
    for p in net.parameters():
        p.requires_grad = False
    frozen = flopcount.profile(net, rt.randn(2, 4), latency=True, backward=True, repeat=1, warmup=0)
    assert report.backward_latency_ms is not None and frozen.backward_latency_ms is None
    assert "not timed: no output of the model needs a gradient" in frozen.table(width=400)


def test_backward_says_batch_norm_runs_in_training_mode():
    report = _timed_step()
    assert any("BatchNorm" in w and "training" in w for w in report.warnings)
    assert "warning: backward=True" in report.table()
    assert json.loads(report.to_json())["warnings"] == report.warnings
    forward_only = flopcount.profile(nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4)), rt.randn(2, 3, 8, 8))
    assert forward_only.warnings == []


def test_a_wide_spread_of_timings_is_a_warning():
    def report(median, fastest):
        return Report([Row("", "Net")], convention="flopcount", mode="graph", device="cpu",
                      latency_ms=median, latency_min_ms=fastest)

    busy = report(1028.0, 213.0)
    assert any("spread widely" in w and "1.03 s" in w and "213 ms" in w for w in busy.warnings)
    assert "warning: timings spread widely" in busy.table()
    assert report(10.0, 9.5).warnings == []


def test_graph_rows_in_files_have_shapes_names_and_parameter_split(resnet18):
    doc = json.loads(resnet18.to_json())
    rows = doc["rows"]
    assert rows[0]["name"] == "resnet18" and rows[0]["input_shapes"] == [[1, 3, 224, 224]]
    assert all(r["parent"] != "" for r in rows)
    assert all(r["input_shapes"] and r["output_shapes"] for r in rows)  # modules too, not only ops
    assert next(r for r in rows if r["name"] == "layer2")["input_shapes"] == [[1, 64, 56, 56]]
    table = list(csv.DictReader(io.StringIO(resnet18.to_csv())))
    assert table[0]["name"] == "resnet18"
    conv = next(r for r in table if r["name"] == "conv1/conv")
    assert conv["params"] == conv["trainable_params"] == str(64 * 3 * 7 * 7) and conv["frozen_params"] == "0"
    # the flatten (reshape) feeds fc, so it is listed before it
    top = [r["name"] for r in rows if r["depth"] == 1]
    assert top.index("/reshape") == top.index("fc") - 1


def test_the_table_has_shapes(resnet18):
    text = resnet18.table(width=400, depth=1)
    layer2 = next(line for line in text.splitlines() if "└ layer2" in line)
    assert "1x64x56x56" in layer2 and "1x128x28x28" in layer2
    assert "Input shape" in resnet18.markdown(depth=1)
