"""Sweeps: every cell's row equals a single profile() (or LLM phase) run, in every executor;
an interrupted sweep resumes to the same file as one run; failed cells are rows, not the end."""

from __future__ import annotations

import json
import os

import pytest

import flopcount
from flopcount import llm
from flopcount.report.budget import METRICS
from flopcount.sweeps import COLUMNS, grid, read_rows, run

pandas = pytest.importorskip("pandas")


def _metrics(report) -> dict:
    return {name.replace("-", "_"): m.read(report) for name, m in METRICS.items()}


def test_rows_equal_single_profiles():
    frame = flopcount.sweep(["resnet18", "bert_base"], batch=[1, 3], seq=[32, 64], resolution=[160])
    assert list(frame.columns) == COLUMNS and len(frame) == 8
    for row in frame.to_dict("records"):
        # an axis a model has no input for leaves that model's input as it is
        shape = (row["batch"], 3, 160, 160) if row["model"] == "resnet18" else (row["batch"], row["seq"])
        report = flopcount.profile(row["model"], input_shape=shape)
        assert {k: row[k] for k in _metrics(report)} == _metrics(report)
        assert pandas.isna(row["error"])
    failed = flopcount.sweep("resnet18", seq=[32]).to_dict("records")[0]
    assert "resnet18 has no input with a sequence" in failed["error"] and pandas.isna(failed["macs"])
    images = flopcount.sweep("resnet18", batch=[2], resolution=[160, 192]).to_dict("records")
    for row in images:
        report = flopcount.profile("resnet18", input_shape=(2, 3, row["resolution"], row["resolution"]))
        assert row["macs"] == report.macs and row["peak_memory"] == _metrics(report)["peak_memory"]


def test_templates_and_llm_phases_equal_their_runs():
    rows = flopcount.sweep("gpt2", input_shape="input_ids=2x{seq}", seq=[16, 48]).to_dict("records")
    assert [r["macs"] for r in rows] == [flopcount.profile("gpt2", input_shape={"input_ids": (2, s)}).macs
                                         for s in (16, 48)]
    rows = flopcount.sweep("llama", phase=["prefill", "decode"], seq=[32], batch=[2],
                           hardware=["h100-sxm"]).to_dict("records")
    prefill = llm.profile("llama", llm.Prefill(32), batch=2, hardware="h100-sxm")
    decode = llm.profile("llama", llm.Decode(context=32), batch=2, hardware="h100-sxm")
    assert rows[0]["macs"] == prefill.to_dict()["total"]["macs"] and rows[0]["kv_cache_bytes"] == prefill.kv_cache_bytes
    assert rows[1]["macs"] == decode.to_dict()["total"]["macs"]
    assert rows[1]["roofline_ms"] == pytest.approx(decode.to_dict()["roofline"]["time_per_output_token_s"] * 1e3)


def test_layer_rows_come_before_their_totals():
    rows = flopcount.sweep("resnet18", layers=1).to_dict("records")
    report = flopcount.profile("resnet18")
    assert [r["layer"] for r in rows[:-1]] == [r.name for r in report.rows if r.depth == 1]
    assert [r["macs"] for r in rows[:-1]] == [r.macs for r in report.rows if r.depth == 1]
    assert rows[-1]["layer"] is None or rows[-1]["layer"] == ""


CELLS = dict(batch=[1, 2], resolution=[64, 96])


def _one_run(tmp_path, name: str) -> str:
    path = str(tmp_path / name)
    run(grid(["resnet18", "no_such_model", "squeezenet1_1"], **CELLS), {}, output=path, layers=1)
    return path


@pytest.mark.parametrize("extension", ["csv", "jsonl", "parquet"])
def test_an_interrupted_sweep_resumes_to_the_same_file(tmp_path, extension):
    pytest.importorskip("pyarrow")
    whole = _one_run(tmp_path, f"whole.{extension}")
    path = str(tmp_path / f"pieces.{extension}")
    cells = grid(["resnet18", "no_such_model", "squeezenet1_1"], **CELLS)

    def stop_after_five(done, total):
        if done == 5:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run(cells, {}, output=path, layers=1, progress=stop_after_five)
    lines_file = path + (".partial.jsonl" if extension == "parquet" else "")
    with open(lines_file, "rb+") as f:   # a kill in the middle of a line
        f.seek(-7, os.SEEK_END)
        f.truncate()
    outcome = run(cells, {}, output=path, layers=1)
    assert outcome.resumed == 4   # the fifth cell's last line was torn: it runs again
    with open(whole, "rb") as a, open(path, "rb") as b:
        assert a.read() == b.read()
    assert not os.path.exists(path + ".partial.jsonl")
    errors = [r for r in read_rows(path) if r["error"]]
    assert len(errors) == 4 and "no_such_model" in errors[0]["error"]


def test_local_workers_write_the_same_file(tmp_path):
    whole = _one_run(tmp_path, "whole.csv")
    path = str(tmp_path / "workers.csv")
    run(grid(["resnet18", "no_such_model", "squeezenet1_1"], **CELLS), {}, output=path, layers=1, workers=2)
    assert open(whole).read() == open(path).read()


def test_a_local_ray_cluster_writes_the_same_rows(tmp_path):
    ray = pytest.importorskip("ray")
    whole = _one_run(tmp_path, "whole.jsonl")
    path = str(tmp_path / "ray.jsonl")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        run(grid(["resnet18", "no_such_model", "squeezenet1_1"], **CELLS), {}, output=path, layers=1, ray=True)
    finally:
        ray.shutdown()
    assert [json.loads(line) for line in open(whole)] == [json.loads(line) for line in open(path)]


def test_plan_cells_equal_their_estimates():
    from flopcount import parallel

    rows = flopcount.sweep("gpt2", plan=["dp=8", "dp=2,tp=2,pp=2"], batch=[64], hardware=["a100-80gb"])
    for row in rows.to_dict("records"):
        d = parallel.estimate("gpt2", parallel.Plan.parse(row["plan"], global_batch=64), hardware="a100-80gb").to_dict()
        assert row["phase"] == "train" and row["flops"] == d["model_flops_per_step"]
        assert row["peak_memory"] == max(s["peak_bytes"] for s in d["stages"])
        assert row["step_time_ms"] == pytest.approx(d["step_time_s"] * 1e3) and row["mfu"] == pytest.approx(d["mfu"])
    # data parallelism keeps every parameter on every GPU; tp=2 and pp=2 split them about four ways
    assert rows["params"][0] == 124_439_808
    assert rows["params"][1] < rows["params"][0] / 2
