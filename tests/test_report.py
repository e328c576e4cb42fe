"""Report renderers: units, the tree table (depth, top-k, sort, shares), tabulate formats,
JSON schema, CSV, HTML, the Chrome trace and the op-type summary."""

import csv
import io
import json

import pytest

import flopcount
import flopcount.runtime as rt
from flopcount.report import units
from flopcount.report.export import ROW_COLUMNS, SCHEMA_VERSION

nn = rt.nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Linear(8, 32), nn.ReLU())
        self.head = nn.Linear(32, 4)

    def forward(self, x):
        return self.head(self.stem(x)) + 1


@pytest.fixture(scope="module")
def eager():
    return flopcount.profile(Net(), rt.randn(2, 8), mode="eager", latency=True, repeat=2)


@pytest.fixture(scope="module")
def graph():
    return flopcount.profile(Net(), rt.randn(2, 8), mode="graph", latency=True, repeat=2)


def test_units():
    assert units.macs_to_string(4_121_925_096) == "4.12 GMac"
    assert units.macs_to_string(999) == "999 Mac" and units.macs_to_string(2_500_000, "GMac") == "0.0 GMac"
    assert units.params_to_string(25_557_032) == "25.56 M" and units.params_to_string(9_408) == "9.41 k"
    assert units.params_to_string(56) == "56" and units.params_to_string(175_000_000_000) == "175.0 B"
    assert units.flops_to_string(8_217_433_576) == "8.22 GFLOPs" and units.flops_to_string(12) == "12 FLOPs"
    assert units.bytes_to_string(51_380_224) == "51.38 MB"
    # a 256-step decode reads the weights 256 times: terabytes, never "3382.96 GB"
    assert units.bytes_to_string(3_382_960_000_000) == "3.38 TB"
    assert units.time_to_string(12.3456) == "12.3 ms" and units.time_to_string(0.0042) == "4.2 µs"
    assert units.time_to_string(None) == "-"
    # at a unit's edge the rounded value decides: never '1e+03 ms'
    assert units.time_to_string(999.7) == "1 s" and units.time_to_string(0.99995) == "1 ms"


def test_totals_and_attributes(eager):
    assert eager.macs == 2 * 8 * 32 + 2 * 32 * 4 and eager.params == 8 * 32 + 32 + 32 * 4 + 4
    t = eager.totals
    assert (t["macs"], t["flops"], t["params"]) == (eager.macs, eager.flops, eager.params)
    assert t["latency_ms"] == eager.latency_ms > 0
    for row in eager.rows:
        for field in ("name", "type", "macs", "flops", "params", "latency_ms", "depth", "parent"):
            assert hasattr(row, field)
    assert [r.name for r in eager.rows] == ["", "stem", "stem.0", "stem.1", "head"]
    assert eager.row("stem.0").parent == "stem" and eager.row("stem.0").depth == 2
    assert [r.name for r in eager.children("stem")] == ["stem.0", "stem.1"]


def test_tree_table_depth_sort_top(eager):
    text = eager.table(depth=1, width=250)
    assert "stem" in text and "stem.0" not in text and "└ 0" not in text
    assert "Params %" in text and "MACs %" in text and "Latency %" in text and "100.00%" in text
    rows = [line for line in eager.table(sort="macs", width=250).splitlines() if "└ " in line]
    assert "└ stem" in rows[0] and "└ head" in rows[-1]  # stem (512 MACs) before head (256)
    top = eager.table(top=2, width=250)
    assert "stem.0" in top and "head" in top and "stem.1" not in top
    assert "convention: flopcount | mode: eager" in top


def test_tabulate_formats(eager):
    github = eager.tabulate("github", depth=1).splitlines()
    assert github[0].startswith("| Module") and set(github[1]) <= set("|-: ")
    assert eager.tabulate("markdown").splitlines()[1].startswith("|:") or "|--" in eager.tabulate("markdown")
    assert eager.tabulate("grid").splitlines()[0].startswith("+--")
    assert eager.tabulate("plain").splitlines()[0].split()[:2] == ["Module", "Type"]
    with pytest.raises(ValueError, match="table format"):
        eager.tabulate("latex")


def test_views_by_op_type_and_by_op(graph):
    summary = graph.by_op_type()
    assert [s.op for s in summary] == ["linear", "relu", "add"]
    assert summary[0].calls == 2 and summary[0].macs == graph.macs
    assert sum(s.flops for s in summary) == graph.flops
    text = graph.tabulate("plain", by="op-type")
    assert text.splitlines()[0].split()[:3] == ["Op", "Calls", "MACs"]
    per_op = graph.tabulate("plain", by="op")
    assert "stem.0/linear" in per_op and "8x32" not in per_op and "2x8, 32x8, 32" in per_op
    with pytest.raises(ValueError, match="view"):
        graph.table(by="layer")


@pytest.mark.parametrize("by", ["module", "op-type", "op"])
def test_latency_columns_only_when_timed(graph, by):
    timed = graph.tabulate("plain", by=by).splitlines()[0]
    untimed = flopcount.profile(Net(), rt.randn(2, 8), mode="graph").tabulate("plain", by=by).splitlines()[0]
    assert "Latency" in timed and "Latency" not in untimed
    assert "MACs" in untimed and "FLOPs" in untimed


def test_json_schema(eager):
    doc = json.loads(eager.to_json())
    assert doc["schema_version"] == SCHEMA_VERSION
    assert set(doc) >= {"model", "convention", "mode", "device", "dtype", "input_shapes", "totals", "memory",
                        "rows", "ops", "by_op_type", "unsupported", "seen_not_counted", "folded"}
    assert doc["totals"]["macs"] == eager.macs and doc["totals"]["params"] == eager.params
    # the root row is named after the model in files, not ''
    assert [r["name"] for r in doc["rows"]] == ["Net"] + [r.name for r in eager.rows[1:]]
    assert doc["rows"][0]["macs"] == eager.macs and isinstance(doc["rows"][0]["macs"], int)
    assert set(ROW_COLUMNS) <= set(doc["rows"][0])
    assert doc["input_shapes"] == [[2, 8]] and doc["ops"][0]["op"] == "linear"


def test_csv_one_row_per_layer(eager):
    rows = list(csv.reader(io.StringIO(eager.to_csv())))
    assert rows[0] == list(ROW_COLUMNS)
    assert len(rows) == 1 + len(eager.rows)
    head = dict(zip(rows[0], rows[-1]))
    assert head["name"] == "head" and int(head["macs"]) == 2 * 32 * 4 and head["input_shapes"] == "2x32"
    ops = list(csv.reader(io.StringIO(eager.to_csv(by="op"))))
    assert len(ops) == 1 + len(eager.ops)


def test_html_table(eager):
    from flopcount.report.html import to_html

    html = to_html(eager)
    assert html.startswith("<div class=\"flopcount-report\">") and "<th>MACs</th>" in html and "Net" in html


def test_chrome_trace_uses_onnxruntime_field_names(graph):
    trace = graph.chrome_trace()
    events = [e for e in trace["traceEvents"] if e.get("cat") == "Node"]
    assert len(events) == len(graph.ops)
    first = events[0]
    assert first["ph"] == "X" and first["cat"] == "Node" and first["name"] == "stem.0/linear_kernel_time"
    assert first["args"]["op_name"] == "linear" and first["args"]["provider"] == "CPUExecutionProvider"
    assert first["args"]["input_type_shape"] == [{"float": [2, 8]}, {"float": [32, 8]}, {"float": [32]}]
    assert first["args"]["output_type_shape"] == [{"float": [2, 32]}]
    assert first["dur"] > 0 and all(e["ts"] >= 0 for e in events)
    assert first["args"]["parameter_size"] == str(4 * (32 * 8 + 32))
    json.dumps(trace)


def test_repr_and_footer(eager):
    assert repr(eager).startswith("<Report Net [eager, flopcount]")
    report = flopcount.profile(Net(), rt.randn(2, 8), mode="eager", convention="ptflops")
    assert "seen, not counted (ptflops convention): 1 ops" in report.tabulate("plain")


def test_a_module_and_its_only_op_show_as_one_row():
    # conv1 ran one conv: its op row would repeat the module's numbers; the residual add of a
    # Bottleneck is that block's own work and stays visible
    from flopcount import models
    from flopcount.report.views import tree_rows

    with rt.meta():
        net = models.get("resnet18")
    report = flopcount.profile(net, rt.empty(1, 3, 224, 224, device="meta"))
    shown = [row.name for row, _ in tree_rows(report)]
    assert "conv1" in shown and not any(name.startswith("conv1.") for name in shown)
    assert any(row.parent == "layer1.0" and row.kind == "op" and row.type == "add" for row, _ in tree_rows(report))
    assert len(shown) < len(report.rows)  # the folded op rows are still in the report itself


def test_timed_module_rows_show_their_achieved_flop_rate(eager):
    # FLOP/s per module = its FLOPs over its own measured time, in the table, JSON and CSV
    stem = eager.row("stem")
    assert stem.latency_ms > 0
    expected = stem.flops / (stem.latency_ms / 1e3)
    assert stem.flops_per_second == pytest.approx(expected)
    text = eager.table(depth=1, width=300)
    assert "FLOP/s" in text
    stem_line = next(line for line in text.splitlines() if "└ stem" in line)
    assert units.rate_to_string(expected, "FLOP") in stem_line
    row = next(r for r in json.loads(eager.to_json())["rows"] if r["name"] == "stem")
    assert row["flops_per_second"] == pytest.approx(expected)
    csv_row = next(r for r in csv.DictReader(io.StringIO(eager.to_csv())) if r["name"] == "stem")
    assert float(csv_row["flops_per_second"]) == pytest.approx(expected)
