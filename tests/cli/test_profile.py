"""``flopcount MODEL`` and each of its options, through click's runner."""

from __future__ import annotations

import csv
import io
import json

import pytest

import flopcount
from flopcount.report.export import ROW_COLUMNS

# resnet50 at 1x3x224x224, from COUNTING.md (published ptflops / flowflops numbers and the default rule)
RESNET50_MACS = 4_089_184_256
RESNET50_PARAMS = 25_557_032
RESNET50_PTFLOPS_EAGER = 4_121_925_096
RESNET50_PTFLOPS_GRAPH = 4_127_444_456


@pytest.fixture(scope="module")
def resnet18():
    return flopcount.profile("resnet18")


def _json(result) -> dict:
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def _markdown_rows(text: str) -> list:
    """Body rows of the first markdown table, as lists of cells."""
    lines = [l for l in text.splitlines() if l.startswith("|")]
    return [[c.strip() for c in l.strip("|").split("|")] for l in lines[2:]]


def test_json_totals_and_rows_equal_profile(run, resnet18):
    result = run("resnet18", "--format", "json")
    doc = _json(result)
    assert result.stderr == ""                                 # machine formats: nothing else mixed in
    assert doc["totals"] == resnet18.totals
    assert [(r["name"], r["macs"], r["flops"], r["params"]) for r in doc["rows"]] == \
        [(r.name or "resnet18", r.macs, r.flops, r.params) for r in resnet18.rows]  # the root named
    assert doc["model"] == "resnet18" and doc["convention"] == "flopcount" and doc["mode"] == "graph"
    assert doc["device"] == "meta"                             # counting alone builds the zoo model on meta
    assert doc["input_shapes"] == [[1, 3, 224, 224]]


def test_default_table_is_the_tree_to_depth_two_with_totals(run, resnet18):
    result = run("resnet18")
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    for header in ("Module", "Params", "Params %", "MACs", "MACs %", "FLOPs", "FLOPs %", "Output"):
        assert header in out
    assert "└ layer1" in out and "└ 0" in out                  # depth 1 and 2
    assert "downsample" not in out and "bn2" not in out        # depth 3 lives inside the blocks
    assert "convention: flopcount" in out
    assert "total: 1.81 GMac, 3.64 GFLOPs, 11.69 M params" in out


def test_resnet50_goldens_in_every_convention_and_mode(run):
    doc = _json(run("resnet50", "--format", "json"))
    assert (doc["totals"]["macs"], doc["totals"]["params"]) == (RESNET50_MACS, RESNET50_PARAMS)
    doc = _json(run("resnet50", "--format", "json", "--mode", "eager", "--convention", "ptflops"))
    assert doc["totals"]["macs"] == RESNET50_PTFLOPS_EAGER and doc["mode"] == "eager"
    assert doc["totals"]["seen_not_counted_macs"] == RESNET50_PTFLOPS_GRAPH - RESNET50_PTFLOPS_EAGER
    doc = _json(run("resnet50", "--format", "json", "--convention", "ptflops"))
    assert doc["totals"]["macs"] == RESNET50_PTFLOPS_GRAPH and doc["convention"] == "ptflops"


def _echoes(report) -> set:
    """Op rows that are a module's only child with the module's numbers (shown as one row)."""
    out = set()
    for r in report.rows:
        kids = report.children(r.name)
        if r.kind != "op" and len(kids) == 1 and kids[0].kind == "op" \
                and (kids[0].macs, kids[0].flops, kids[0].params) == (r.macs, r.flops, r.params):
            out.add(kids[0].name)
    return out


def test_depth(run, resnet18):
    echoes = _echoes(resnet18)
    for depth in (0, 1, 3):
        rows = _markdown_rows(run("resnet18", "--format", "markdown", "--depth", depth).stdout)
        assert len(rows) == sum(1 for r in resnet18.rows if r.depth <= depth and r.name not in echoes)


def test_top_and_sort_list_the_most_expensive_layers(run, resnet18):
    rows = _markdown_rows(run("resnet18", "--format", "markdown", "--top", 3, "--sort", "flops").stdout)
    echoes = _echoes(resnet18)
    shown = [r for r in resnet18.rows if r.depth <= 2 and r.name not in echoes]
    leaves = [r for r in shown if r.depth == 2 or not [c for c in resnet18.children(r.name) if c.name not in echoes]]
    expected = sorted(leaves, key=lambda r: r.flops, reverse=True)[:3]
    assert [r[0] for r in rows] == [r.name for r in expected]
    rows = _markdown_rows(run("resnet18", "--format", "markdown", "--depth", 1, "--sort", "params").stdout)
    params = [int(r.params) for r in resnet18.rows if r.depth == 1]
    shown = [_units(r[2]) for r in rows[1:]]                   # the Params column, largest first
    assert len(shown) == len(params) and shown == sorted(shown, reverse=True)
    assert sorted(shown) == sorted(_units(_human(p)) for p in params)


def _units(text: str) -> float:
    number, _, unit = text.partition(" ")
    return float(number) * {"": 1, "k": 1e3, "M": 1e6, "B": 1e9}[unit]


def _human(params: int) -> str:
    from flopcount.report.units import params_to_string

    return params_to_string(params)


@pytest.mark.parametrize("key, attr", [("macs", "macs"), ("flops", "flops"), ("params", "params"),
                                       ("memory", "output_bytes")])
def test_sort_orders_siblings_largest_first(run, resnet18, key, attr):
    rows = _markdown_rows(run("resnet18", "--format", "markdown", "--depth", 1, "--sort", key).stdout)
    children = [r for r in resnet18.rows if r.depth == 1]
    expected = sorted(children, key=lambda r: getattr(r, attr), reverse=True)   # stable: ties keep tree order
    assert [r[0] for r in rows[1:]] == ["└ " + r.name.rsplit("/", 1)[-1] for r in expected]


def test_csv_has_a_header_and_one_row_per_layer(run, resnet18):
    result = run("resnet18", "--format", "csv")
    assert result.exit_code == 0 and result.stderr == ""
    table = list(csv.reader(io.StringIO(result.stdout)))
    assert tuple(table[0]) == ROW_COLUMNS
    assert [(r[0], int(r[6])) for r in table[1:]] == [(r.name or "resnet18", r.macs) for r in resnet18.rows]


def test_views_by_op_and_op_type(run, resnet18):
    rows = _markdown_rows(run("resnet18", "--format", "markdown", "--by", "op").stdout)
    assert len(rows) == len(resnet18.by_op("forward"))
    table = list(csv.DictReader(io.StringIO(run("resnet18", "--format", "csv", "--by", "op-type").stdout)))
    assert sorted(r["op"] for r in table) == sorted({o.op for o in resnet18.ops})
    assert sum(int(r["macs"]) for r in table) == resnet18.macs
    assert sum(int(r["calls"]) for r in table) == len(resnet18.ops)
    table = list(csv.DictReader(io.StringIO(run("resnet18", "--format", "csv", "--by", "op").stdout)))
    assert [r["op"] for r in table] == [o.op for o in resnet18.ops]


def test_trace_has_one_event_per_op(run, resnet18):
    result = run("resnet18", "--format", "trace", "--latency", "--repeat", 1, "--warmup", 0)
    assert result.stderr == ""
    events = [e for e in json.loads(result.stdout)["traceEvents"] if e.get("cat") == "Node"]
    assert [e["args"]["op_name"] for e in events] == [o.op for o in resnet18.ops]
    assert all(e["ph"] == "X" and e["dur"] >= 0 for e in events)


def test_a_trace_without_times_is_refused_in_one_line(run):
    result = run("resnet18", "--format", "trace")
    assert result.exit_code == 2 and result.stdout == ""
    assert "timeline of measured times" in result.stderr and "--latency" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_batch_and_input_shape_spellings(run, resnet18):
    doc = _json(run("resnet18", "--format", "json", "--batch", 4))
    assert doc["input_shapes"] == [[4, 3, 224, 224]]
    assert doc["totals"]["macs"] == 4 * resnet18.macs           # every op scales with the batch
    small = flopcount.profile("resnet18", input_shape=(1, 3, 112, 112), device="meta").macs
    for spelling in ("1x3x112x112", "1,3,112,112", "x=1x3x112x112", "(1, 3, 112, 112)"):
        doc = _json(run("resnet18", "--format", "json", "--input-shape", spelling))
        assert doc["totals"]["macs"] == small and doc["input_shapes"] == [[1, 3, 112, 112]]


def test_backward_counts_the_training_step(run, resnet18):
    doc = _json(run("resnet18", "--format", "json", "--backward"))
    t = doc["totals"]
    # GEMM backward: 2x forward, except the first conv whose input needs no gradient (1x)
    first_conv = resnet18.row("conv1").macs
    assert t["backward_macs"] == 2 * resnet18.macs - first_conv
    assert t["training_macs"] == t["macs"] + t["backward_macs"]


def test_latency_runs_on_the_device(run, factory_file):
    doc = _json(run(f"{factory_file}:mlp", "-i", "3,4", "--latency", "--repeat", 2, "--warmup", 0,
                    "--format", "json"))
    assert doc["device"] == "cpu"
    assert doc["totals"]["latency_ms"] > 0
    assert all(r["latency_ms"] is not None for r in doc["rows"])
    table = run(f"{factory_file}:mlp", "-i", "3,4", "--latency", "--repeat", 2, "--sort", "latency").stdout
    assert "Latency" in table


def test_an_explicit_device_builds_the_zoo_model_there(run):
    assert _json(run("squeezenet1_1", "--format", "json", "--device", "cpu"))["device"] == "cpu"


def test_factory_args_and_named_inputs(run, factory_file):
    doc = _json(run(f"{factory_file}:mlp", "-i", "3,4", "--factory-arg", "width=16", "--format", "json"))
    assert doc["totals"]["params"] == (4 * 16 + 16) + (16 * 2 + 2)
    assert doc["totals"]["macs"] == 3 * 4 * 16 + 3 * 16 * 2
    assert doc["model"] == "nets.py:mlp"
    doc = _json(run(f"{factory_file}:pair", "-i", "extra=2x3", "-i", "image=2x4", "--format", "json"))
    assert doc["totals"]["macs"] == 2 * 4 * 2 + 2 * 3 * 2


def test_dtype_for_integer_inputs(run, factory_file):
    doc = _json(run(f"{factory_file}:tagger", "-i", "2x5", "--dtype", "int64", "--format", "json"))
    assert doc["totals"]["macs"] == 2 * 5 * 6 * 3                # the embedding is a lookup: 0 MACs
    ops = [o["op"] for o in doc["ops"]]
    assert ops[0] == "embedding" and doc["ops"][0]["input_dtypes"][1] == "int64"


def test_strict_fails_on_ops_without_a_rule(run, factory_file):
    result = run(f"{factory_file}:summed", "-i", "2,4", "--convention", "ptflops")
    assert result.exit_code == 0 and "no rule: op sum" in result.stdout
    result = run(f"{factory_file}:summed", "-i", "2,4", "--convention", "ptflops", "--strict")
    assert result.exit_code == 2 and "sum" in result.stderr and result.stdout == ""


def test_native_file(run, native_file):
    doc = _json(run(native_file, "--format", "json"))
    assert doc["totals"]["macs"] == 3 * 4 * 8 + 3 * 8 * 2
    assert doc["model"] == "mlp.safetensors" and doc["input_shapes"] == [[3, 4]]


def test_output_file_holds_what_stdout_would(run, tmp_path):
    target = tmp_path / "report.csv"
    target.write_text("old")
    result = run("resnet18", "--format", "csv", "--output", target)
    assert result.exit_code == 0 and result.stdout == ""
    assert result.stderr.strip() == f"flopcount: wrote {target}"
    assert target.read_text() == run("resnet18", "--format", "csv").stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.csv"]      # no temporary left behind
    table = tmp_path / "table.txt"
    run("resnet18", "--output", table, "--quiet")
    assert "total: 1.81 GMac" in table.read_text() and "\x1b[" not in table.read_text()


def test_a_failing_run_leaves_no_output_file(run, tmp_path):
    fresh, existing = tmp_path / "new.json", tmp_path / "old.json"
    existing.write_text("keep me")
    for target in (fresh, existing):
        result = run("resnet18", "--format", "json", "--input-shape", "1x1x224x224", "--output", target)
        assert result.exit_code == 2
    assert not fresh.exists()
    assert existing.read_text() == "keep me"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.json"]


def test_quiet_silences_stderr(run, tmp_path):
    result = run("resnet18", "--format", "json", "--output", tmp_path / "r.json", "--quiet")
    assert result.exit_code == 0 and result.stderr == "" and result.stdout == ""


def test_options_may_come_before_the_model_and_profile_is_the_default(run):
    a = run("--format", "json", "--depth", 1, "resnet18").stdout
    b = run("profile", "resnet18", "--format", "json", "--depth", 1).stdout
    assert json.loads(a)["totals"] == json.loads(b)["totals"]


def test_debug_lets_the_exception_through(run):
    result = run("resnet5", "--debug", catch_exceptions=True)
    assert isinstance(result.exception, flopcount.FlopcountError)
    assert result.exit_code == 1


@pytest.mark.gpu
def test_latency_on_the_gpu(run):
    doc = _json(run("resnet18", "--device", "cuda", "--latency", "--repeat", 2, "--format", "json"))
    assert doc["device"].startswith("cuda") and doc["totals"]["latency_ms"] > 0
    assert doc["totals"]["macs"] == flopcount.profile("resnet18", device="meta").macs
