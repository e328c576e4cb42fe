"""Tables of many rows are drawn in time linear in their rows, with the same cells: above
``RICH_MAX_ROWS`` rows the box is padded strings, not rich's layout (a 200,000-node chain's table
took minutes); a node with 100,000 inputs lists a few shapes and the count, not all of them."""

from __future__ import annotations

import flopcount
import flopcount.runtime as rt
from flopcount.report import table as table_mod

nn = rt.nn


def _rows(text: str) -> list:
    """The table's cells, row by row, from either drawing."""
    return [[c.strip() for c in line.strip().strip("│┃").split("│" if "│" in line else "┃")]
            for line in text.splitlines() if line.lstrip().startswith(("│", "┃"))]


def test_the_fast_box_holds_the_same_cells_as_the_rich_table(monkeypatch):
    report = flopcount.profile(nn.Sequential(*[nn.Linear(4, 4) for _ in range(6)]), rt.randn(2, 4))
    rich = report.table(width=400)
    monkeypatch.setattr(table_mod, "RICH_MAX_ROWS", 3)
    fast = report.table(width=400)
    assert fast != rich and fast.splitlines()[0] in rich           # another drawing, the same title
    assert _rows(fast) == _rows(rich) and len(_rows(fast)) == 1 + 1 + 6    # header, model, its six layers
    assert fast.splitlines()[-len(table_mod._footer(report)):] == table_mod._footer(report)
    widths = {len(line) for line in fast.splitlines()[1:1 + 8 + 3]}       # 8 rows and 3 rules
    assert len(widths) == 1                                         # every line of the box equally wide


def test_a_node_with_100000_inputs_lists_a_few_shapes_and_how_many():
    assert table_mod._shapes([(1, 16)] * 100_000) == ", ".join(["1x16"] * 8) + ", ... (100,000 inputs)"
    assert table_mod._shapes([(1, 16), None]) == "1x16, -"
