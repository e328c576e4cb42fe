"""``flopcount serve``: the simulated server on the command line, and its bad input."""

from __future__ import annotations

import json

from flopcount import serving
from conftest import assert_bad_input


def test_json_equals_the_library_and_the_table_names_the_rates(run, tmp_path):
    args = ["serve", "llama", "--hardware", "h100-sxm", "--rate", "2,50", "--prompt", "uniform:16:128",
            "--output", "16", "--duration", "5", "--slo", "ttft=20ms,tpot=1ms"]
    result = run(*args, "-f", "json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    direct = serving.serve("llama", "h100-sxm", rates=[2, 50], prompt="uniform:16:128", output="16", duration=5,
                           slo={"ttft": 0.02, "tpot": 0.001})
    assert [p["requests"] for p in doc["points"]] == [p.requests for p in direct.points]
    assert [p["ttft_s"]["p50"] for p in doc["points"]] == [p.ttft.p50 for p in direct.points]
    assert doc["slo_s"] == {"ttft": 0.02, "tpot": 0.001}
    plot = tmp_path / "curve.png"
    table = run(*args, "--plot", plot)
    assert table.exit_code == 0, table.stderr
    assert "rate/s" in table.stdout and "goodput/s" in table.stdout and plot.read_bytes()[:4] == b"\x89PNG"


def test_bad_input_is_one_line(run, tmp_path):
    base = ["serve", "llama", "--hardware", "h100-sxm"]
    assert_bad_input(run(*base, "--rate", "0"), "--rate", "'0'")
    assert_bad_input(run(*base, "--rate", "1", "--prompt", "lots"), "prompt 'lots'")
    assert_bad_input(run(*base, "--rate", "1", "--slo", "ttft=soon"), "'soon' is not a time")
    assert_bad_input(run(*base, "--rate", "1", "--spec", "llama:four:0.5"), "expected DRAFT:K:ACCEPT")
    assert_bad_input(run(*base, "--rate", "1", "--prefix-hit", "1.5"), "--prefix-hit", "1.5")
    assert_bad_input(run("serve", "llama2_7b", "--hardware", "l4", "--rate", "1"), "do not fit in 90% of 1 x 24 GB")
    assert_bad_input(run(*base, "--rate", "1", "--plot", tmp_path / "x.txt"), "x.txt")
    assert_bad_input(run("serve", "llama", "--rate", "1"), "--hardware")
