"""``flopcount diff A B``: the rows and totals of ``Report.diff``, as JSON and as a table."""

import json

import flopcount


def test_the_command_line_diff(run):
    result = run("diff", "resnet18", "resnet34", "--format", "json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    a, b = flopcount.profile("resnet18"), flopcount.profile("resnet34")
    assert doc["totals"]["macs"] == {"a": a.macs, "b": b.macs, "delta": b.macs - a.macs}
    assert doc["counts"]["removed"] == 0 and doc["counts"]["added"] > 0
    table = run("diff", "resnet18", "resnet34", "--format", "markdown").stdout
    assert "layer1.2.conv1" in table and "total macs: 1.81 GMac -> 3.66 GMac" in table
