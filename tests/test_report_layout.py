"""The rich table on narrow terminals: share columns go first, then long headers, then text is
cut with an ellipsis; numbers are never wrapped or cut, and no line is wider than the console."""

from __future__ import annotations

import io

import pytest

import flopcount
import flopcount.runtime as rt
from flopcount import models
from flopcount.report.layout import fit, table_width
from flopcount.report.views import tree_rows
from flopcount.report.units import flops_to_string, macs_to_string, params_to_string

rich_console = pytest.importorskip("rich.console")


@pytest.fixture(scope="module")
def resnet():
    with rt.meta():
        net = models.get("resnet18")
    return flopcount.profile(net, rt.empty(1, 3, 224, 224, device="meta"))


def _render(report, width: int) -> list:
    buffer = io.StringIO()
    rich_console.Console(file=buffer, width=width, color_system=None).print(report)
    return buffer.getvalue().splitlines()


def _body(lines: list) -> list:
    """The table's data lines (between the header rule and the bottom border)."""
    start = next(i for i, line in enumerate(lines) if line.startswith("┡"))
    end = next(i for i, line in enumerate(lines) if line.startswith("└"))
    return lines[start + 1:end]


@pytest.mark.parametrize("width", [60, 80, 100, 160])
def test_numbers_stay_whole_at_every_width(resnet, width):
    lines = _render(resnet, width)
    assert max(len(line) for line in lines) <= width
    body = _body(lines)
    rows = [row for row, _ in tree_rows(resnet)]  # no depth limit: each shown row one line, none wrapped
    assert len(body) == len(rows)
    for line, row in zip(body, rows):
        cells = [c.strip() for c in line.strip("│").split("│")]
        assert macs_to_string(row.macs) in cells and flops_to_string(row.flops) in cells
        assert params_to_string(row.params) in cells
        assert not any(c.endswith("…") and c[:-1].replace(".", "").isdigit() for c in cells)


def test_share_columns_go_first_then_headers_shorten_then_text_is_cut(resnet):
    wide, medium, narrow = (_render(resnet, w) for w in (160, 100, 80))
    header = lambda lines: next(line for line in lines if "MACs" in line)  # noqa: E731
    assert "MACs %" in header(wide) and "100.00%" in "".join(wide)
    assert "MACs %" not in header(medium) and "Output" in header(medium) and "…" not in "".join(_body(medium))
    assert "Out " in header(narrow) and "Output" not in header(narrow)
    # resnet18's longest names are cut, the short ones shown whole
    assert "AdaptiveAvgPool2d" not in "".join(narrow) and "AdaptiveA…" in "".join(narrow)
    assert "└ conv1" in "".join(narrow)


def test_the_op_view_keeps_its_numbers_at_80_columns(resnet):
    text = resnet.table(by="op", width=80)
    assert max(len(line) for line in text.splitlines()) <= 80
    for rec in resnet.by_op("forward"):
        assert macs_to_string(rec.macs) in text and flops_to_string(rec.flops) in text
    assert "Scope" not in text  # dropped before any number


def test_a_wide_console_gets_the_full_table(resnet):
    full = resnet.table(width=1000)
    assert all(h in full for h in ("Params %", "MACs %", "FLOPs %", "Output"))


def test_fit_by_hand():
    headers = ["Module", "Type", "MACs", "MACs %"]
    body = [["encoder.layer.0.attention", "BertSelfAttention", "1.81 GMac", "100.00%"]]
    # natural widths 25, 17, 9, 7: 58 cells of text and numbers, 2 of padding per column, 5 borders
    assert table_width([25, 17, 9, 7]) == 58 + 8 + 5
    assert fit(headers, body, 71).headers == headers
    assert fit(headers, body, 70).headers == ["Module", "Type", "MACs"]
    # without the share column: 25 + 17 + 9 + 6 + 4 = 61 > 50, 11 cells too many. The Module
    # column gives up 8 to be level with Type (17, 17), then the two take turns: 16/17, 16/16, 15/16
    narrow = fit(headers, body, 50)
    assert narrow.columns == [0, 1, 2]
    assert narrow.max_widths == {0: 15, 1: 16}  # MACs keeps its 9 cells
    assert table_width([15, 16, 9]) == 50
