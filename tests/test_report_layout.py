"""The rich table on narrow terminals: share columns go first, then long headers, then text is
cut with an ellipsis; numbers are never wrapped or cut, and no line is wider than the console."""

from __future__ import annotations

import io

import pytest

import flopcount
import flopcount.runtime as rt

nn = rt.nn
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


def test_share_columns_go_first_then_headers_shorten_then_columns_are_dropped_and_named(resnet):
    full, wide, narrow = (_render(resnet, w) for w in (1000, 160, 80))
    header = lambda lines: next(line for line in lines if "MACs" in line)  # noqa: E731
    assert "MACs %" in header(full) and "Input shape" in header(full)
    assert not any("left out" in line for line in full)
    assert "MACs %" not in header(wide) and "Input shape" in header(wide)
    assert any("columns left out at 160 columns: Params %, MACs %, FLOPs %" in line for line in wide)
    # at 80 columns the shapes go (whole, never cut) and the table says so
    assert "shape" not in header(narrow) and "x224" not in "".join(_body(narrow))
    left_out = " ".join(" ".join(narrow[narrow.index(next(line for line in narrow if "left out" in line)):]).split())
    assert "Out bytes, Input shape, Output shape" in left_out
    # the names a reader copies are whole; a long type may be cut
    names = "".join(_body(narrow))
    assert "└ downsample" in names and "└ conv1" in names
    assert "AdaptiveAvgPool2d" not in names and "AdaptiveAvgPool…" in names


def test_latency_keeps_its_header_at_80_columns():
    net = nn.Sequential(nn.Linear(8, 8), nn.ReLU())
    report = flopcount.profile(net, rt.randn(2, 8), latency=True, repeat=1, warmup=0)
    text = report.table(width=80)
    assert "Latency" in text and "Time" not in text


def test_the_op_view_keeps_node_names_whole_at_80_columns(resnet):
    text = resnet.table(by="op", width=80, top=8)
    for rec in sorted(resnet.by_op("forward"), key=lambda r: r.macs, reverse=True)[:8]:
        assert rec.name in text
    assert "columns left out at 80 columns: Scope" in text


def test_the_op_view_keeps_its_numbers_at_80_columns(resnet):
    text = resnet.table(by="op", width=80)
    assert max(len(line) for line in text.splitlines()) <= 80
    for rec in resnet.by_op("forward"):
        assert macs_to_string(rec.macs) in text and flops_to_string(rec.flops) in text
    assert "┃ Scope" not in text  # dropped before any number


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
    # column (names) is not cut; Type cut to its floor of 8 still leaves 52: Type goes
    narrow = fit(headers, body, 50)
    assert narrow.columns == [0, 2] and narrow.max_widths == {}
    assert narrow.dropped == ["Type", "MACs %"]
    # at 60 Type fits cut to 16 cells beside the whole name
    assert fit(headers, body, 60).max_widths == {1: 16}
    assert table_width([25, 16, 9]) == 60
