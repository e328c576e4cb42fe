"""``flopcount check``: a cost gate that passes just inside a budget, fails just outside it
with one line per limit, catches a one-layer regression against a baseline, and turns bad
budget files into one line and exit 2."""

from __future__ import annotations

import json

import pytest

import flopcount
from flopcount.report.budget import METRICS, metrics_of
from flopcount.report.units import parse_quantity
from conftest import assert_bad_input

RESNET50_PARAMS = 25_557_032          # torchvision's model card
RESNET50_MACS = 4_089_184_256         # its convolutions and fc, one multiply-add each (fvcore: 4.09 G)

LAYERS_SOURCE = '''
import flopcount.runtime as rt
from flopcount.runtime import nn


def stack(layers=2):
    return nn.Sequential(*[nn.Linear(16, 16) for _ in range(layers)])
'''


@pytest.fixture(scope="module")
def resnet50_metrics() -> dict:
    values = metrics_of(flopcount.profile("resnet50"))
    assert values["params"] == RESNET50_PARAMS and values["macs"] == RESNET50_MACS
    assert values["parameter-bytes"] == 4 * RESNET50_PARAMS
    assert set(values) == set(METRICS)
    return values


def _limits(values: dict, offset: int) -> list:
    return [arg for name, value in values.items() for arg in (f"--max-{name}", str(value + offset))]


def test_just_above_every_metric_passes(run, resnet50_metrics):
    result = run("check", "resnet50", *_limits(resnet50_metrics, +1))
    assert result.exit_code == 0, result.output
    assert result.stdout.count("ok   ") == len(METRICS)
    assert "resnet50: within 8 limits" in result.stdout


def test_just_below_every_metric_fails_with_a_line_each(run, resnet50_metrics):
    result = run("check", "resnet50", *_limits(resnet50_metrics, -1))
    assert result.exit_code == 1
    failed = [line for line in result.stdout.splitlines() if line.startswith("FAIL ")]
    assert [line.split()[1] for line in failed] == list(METRICS)
    assert all(" by 1 " in line for line in failed), failed   # the size of the excess: one unit
    assert "8 of 8 limits exceeded" in result.stdout


def test_a_budget_file_and_options_together(run, tmp_path, resnet50_metrics):
    budget = tmp_path / "budget.toml"
    budget.write_text('[budget]\nmax-macs = "4.2G"\nmax-params = "26M"\nmax-peak-memory = "120MB"\n')
    assert run("check", "resnet50", "--budget", budget).exit_code == 0
    # an option overrides the file's limit of the same metric
    result = run("check", "resnet50", "--budget", budget, "--max-macs", "4G")
    assert result.exit_code == 1
    assert result.stdout.startswith("FAIL macs 4.09 GMac over its budget 4.0 GMac by 89.18 MMac (+2.23%)")


def test_a_baseline_catches_a_one_layer_change(run, tmp_path):
    source = tmp_path / "nets.py"
    source.write_text(LAYERS_SOURCE)
    baseline = tmp_path / "cost.json"
    model = f"{source}:stack"
    written = run("check", model, "-i", "1x16", "--baseline", baseline, "--update")
    assert written.exit_code == 0, written.output
    assert json.loads(baseline.read_text())["metrics"]["macs"] == 2 * 16 * 16
    assert run("check", model, "-i", "1x16", "--baseline", baseline).exit_code == 0
    grown = run("check", model, "-i", "1x16", "--factory-arg", "layers=3", "--baseline", baseline, "--tolerance", "1%")
    assert grown.exit_code == 1
    assert "FAIL macs 768 Mac against the baseline's 512 Mac: +256 Mac (+50.00%, tolerance 1.00%)" in grown.stdout
    assert "FAIL params 816 against the baseline's 544: +272 (+50.00%" in grown.stdout
    # a tolerance that covers the growth lets it through
    assert run("check", model, "-i", "1x16", "--factory-arg", "layers=3", "--baseline", baseline,
               "--tolerance", "60%").exit_code == 0


def test_a_report_json_is_a_baseline(run, tmp_path):
    report = tmp_path / "report.json"
    assert run("resnet18", "-f", "json", "-o", report).exit_code == 0
    assert run("check", "resnet18", "--baseline", report).exit_code == 0
    assert run("check", "resnet34", "--baseline", report).exit_code == 1


@pytest.mark.parametrize("text, fragment", [
    ("max-macs = 4.2G\n", "not a TOML file"),
    ('[limits]\nmax-macs = "4.2G"\n', "expected one [budget] table"),
    ("[budget]\n", "the [budget] table has no limits"),
    ('[budget]\nmax-flop = "3G"\n', "unknown metric 'flop'"),
    ('[budget]\nmax-macs = "lots"\n', "macs: 'lots' is not a count"),
    ("[budget]\nmax-params = -5\n", "params must be a finite number >= 0, got -5"),
    ("[budget]\nmax-params = true\n", "params must be a number or a quantity"),
])
def test_bad_budget_files_are_one_line(run, tmp_path, text, fragment):
    budget = tmp_path / "budget.toml"
    budget.write_text(text)
    assert_bad_input(run("check", "resnet18", "--budget", budget), str(budget), fragment)


def test_bad_requests_are_one_line(run, tmp_path):
    assert_bad_input(run("check", "resnet18"), "needs limits")
    assert_bad_input(run("check", "resnet18", "--max-macs", "4G", "--update"), "--update writes the baseline")
    assert_bad_input(run("check", "resnet18", "--max-peak-memory", "12 parsecs"), "not a size such as 120MB")
    assert_bad_input(run("check", "resnet18", "--baseline", tmp_path / "none.json"), "none.json")
    broken = tmp_path / "broken.json"
    broken.write_text('{"kind": "flopcount-baseline", "metrics": {"macs": "many"}}')
    assert_bad_input(run("check", "resnet18", "--baseline", broken), "'macs' = 'many'")
    assert_bad_input(run("check", "resnet18", "--max-macs", "4G", "--tolerance", "a bit"), "tolerance 'a bit'")


def test_the_update_leaves_no_half_written_file(run, tmp_path):
    target = tmp_path / "missing" / "cost.json"
    assert_bad_input(run("check", "resnet18", "--baseline", target, "--update"), "cost.json")
    assert not target.parent.exists()


@pytest.mark.parametrize("text, kind, value", [
    ("4.2G", "count", 4.2e9), ("4.12 GMac", "count", 4.12e9), ("26M", "count", 26e6), ("7B", "count", 7e9),
    ("120MB", "bytes", 120e6), ("1.5GiB", "bytes", 1.5 * 2**30), ("100 B", "bytes", 100), ("3e3", "count", 3000),
])
def test_quantities_as_people_write_them(text, kind, value):
    assert parse_quantity(text, kind) == pytest.approx(value)
