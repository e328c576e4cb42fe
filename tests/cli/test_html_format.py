"""``--format html``: one self-contained page, small, its embedded numbers the JSON report's;
bad input refused in one line with nothing written."""

from __future__ import annotations

import html as html_text
import json
import os
import re

import pytest

from conftest import assert_bad_input


def embedded(text: str) -> dict:
    """The page's data, its columns unpacked into records again."""
    data = json.loads(re.search(r'<script type="application/json" id="flopcount-data">(.*?)</script>', text, re.S).group(1))
    return data


def records(table: dict) -> list:
    columns = {}
    for name, c in table["c"].items():
        columns[name] = [c["d"][i] for i in c["i"]] if isinstance(c, dict) else c
    return [{name: values[k] for name, values in columns.items()} for k in range(table["n"])]


def test_the_page_embeds_the_json_reports_rows_and_ops_and_inlines_everything(run, tmp_path):
    out = tmp_path / "r.html"
    assert run("resnet18", "--hardware", "a100-80gb", "--format", "html", "-o", out).exit_code == 0
    doc = json.loads(run("resnet18", "--hardware", "a100-80gb", "--format", "json").stdout)
    text = out.read_text()
    assert "<script src" not in text and "<link" not in text and "http://" not in text.split("flopcount-data")[0]
    data = embedded(text)
    rows, ops = records(data["rows"]), records(data["ops"])
    assert [(r["name"], r["macs"], r["flops"], r["params"]) for r in rows] == \
        [(r["name"], r["macs"], r["flops"], r["params"]) for r in doc["rows"]]
    names = [r["name"] for r in doc["rows"]]
    assert all(doc["rows"][i]["parent"] in (None, "", names[r["parent"]]) for i, r in enumerate(rows) if i)
    assert [(o["name"], o["inputs"], o["outputs"], o["attrs"]) for o in ops] == \
        [(o["name"], o["inputs"], o["outputs"], o["attrs"]) for o in doc["ops"]]
    assert data["hardware"]["name"] == "a100-80gb"


def test_resnet50_and_a_7b_decoder_stay_small(run, tmp_path):
    for model, limit in (("resnet50", 1_000_000), ("llama2_7b", 5_000_000)):
        out = tmp_path / f"{model}.html"
        assert run(model, "--format", "html", "-o", out).exit_code == 0
        assert out.stat().st_size < limit, (model, out.stat().st_size)
        assert len(records(embedded(out.read_text())["ops"])) > 100


def test_a_timeline_without_measured_times_is_refused_before_anything_runs(run, tmp_path):
    out = tmp_path / "t.html"
    assert_bad_input(run("resnet18", "--format", "html", "--timeline", "-o", out), "--timeline needs measured times")
    assert not out.exists()
    assert_bad_input(run("resnet18", "--latency", "--timeline", "-o", out), "--format html")
    assert not out.exists()


def test_an_unwritable_path_is_refused_with_nothing_written(run, tmp_path):
    out = tmp_path / "missing" / "r.html"
    assert_bad_input(run("resnet18", "--format", "html", "-o", out), "does not exist")
    locked = tmp_path / "locked"
    locked.mkdir()
    os.chmod(locked, 0o500)
    if os.access(locked, os.W_OK):   # root writes anywhere
        pytest.skip("running as root: a read-only directory is writable")
    assert_bad_input(run("resnet18", "--format", "html", "-o", locked / "r.html"), "not writable")
    assert os.listdir(locked) == []


def test_diff_phase_and_plan_pages(run, tmp_path):
    for args, kind in ((("diff", "resnet18", "resnet34"), "diff"), (("gpt2", "--decode", "--context", "16"), "document"),
                       (("gpt2", "-i", "1x32", "--plan", "dp=4", "--global-batch", "8"), "document")):
        out = tmp_path / "p.html"
        result = run(*args, "--format", "html", "-o", out)
        assert result.exit_code == 0, result.stderr
        assert embedded(out.read_text())["kind"] == kind
    doc = json.loads(run("gpt2", "--decode", "--context", "16", "--format", "json").stdout)
    run("gpt2", "--decode", "--context", "16", "--format", "html", "-o", out)
    assert embedded(out.read_text())["doc"] == doc


def test_the_notebook_shows_the_same_page_in_an_iframe():
    import flopcount

    report = flopcount.profile("resnet18")
    shown = report._repr_html_()
    srcdoc = re.match(r'<iframe srcdoc="(.*?)" ', shown, re.S).group(1)
    assert html_text.unescape(srcdoc) == report.to_html()


def test_to_html_into_a_missing_directory_raises_and_writes_nothing(tmp_path):
    import flopcount

    with pytest.raises(OSError):
        flopcount.profile("resnet18").to_html(tmp_path / "missing" / "r.html")
    assert not (tmp_path / "missing").exists()
