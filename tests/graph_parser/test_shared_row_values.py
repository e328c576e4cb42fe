"""What the rows of a graph report share: one tuple per distinct shape list, one read-only empty
``macs_by_dtype`` for rows without MACs; and that sharing never lets one row's change reach another."""

import copy
import pickle

import pytest

import flopcount.runtime as rt
from flopcount.graph_parser import profile_graph
from flopcount.report.model import Row
from flopcount.report.sums import add_macs_of, add_macs_to

nn = rt.nn


class Tower(nn.Module):
    """Three equal blocks: every block's rows have the same shapes as the others'."""

    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([nn.Linear(8, 8) for _ in range(3)])

    def forward(self, x):
        for block in self.blocks:
            x = block(x).relu()
        return x


@pytest.fixture(scope="module")
def report():
    return profile_graph(Tower(), (rt.randn(2, 8),))


def test_equal_shapes_are_one_tuple_across_rows(report):
    relus = [r for r in report.rows if r.type == "relu"]
    blocks = [report.row(f"blocks.{i}") for i in range(3)]
    assert len(relus) == 3 and all(r.input_shapes == ((2, 8),) for r in relus)
    # the rows hold the same tuple, not equal copies
    assert len({id(r.input_shapes) for r in relus}) == 1
    assert len({id(r.output_shapes) for r in relus + blocks}) == 1
    assert relus[0].input_shapes[0] is blocks[0].input_shapes[0]
    linears = [r for r in report.rows if r.type == "linear"]
    assert linears[0].input_shapes == ((2, 8), (8, 8), (8,)) and linears[1].input_shapes is linears[0].input_shapes
    # the op records share the rows' tuples
    record = next(o for o in report.ops if o.name == relus[1].name)
    assert record.input_shapes is relus[1].input_shapes


def test_rows_without_macs_share_an_empty_mapping_that_refuses_writes(report):
    relus = [r for r in report.rows if r.type == "relu"]
    assert relus[0].macs_by_dtype == {} and relus[0].macs_by_dtype is relus[1].macs_by_dtype
    with pytest.raises(TypeError, match="add_macs_to"):
        relus[0].macs_by_dtype["float32"] = 1
    with pytest.raises(TypeError, match="shared"):
        relus[0].macs_by_dtype.update(float32=1)
    assert relus[1].macs_by_dtype == {}


def test_adding_macs_to_one_row_leaves_the_others_alone(report):
    a, b = Row("a", "A"), Row("b", "B")
    add_macs_to(a, "int8", 5)
    assert a.macs_by_dtype == {"int8": 5} and b.macs_by_dtype == {} and Row("c", "C").macs_by_dtype == {}
    add_macs_to(b, "float32", 0)  # no MACs: the row keeps the shared mapping
    assert b.macs_by_dtype is Row("c", "C").macs_by_dtype
    add_macs_of(b, a)
    add_macs_to(a, "int8", 1)
    assert (a.macs_by_dtype, b.macs_by_dtype) == ({"int8": 6}, {"int8": 5})
    linears = [r for r in report.rows if r.type == "linear"]
    assert linears[0].macs_by_dtype == {"float32": 2 * 8 * 8}
    assert linears[0].macs_by_dtype is not linears[1].macs_by_dtype


def test_a_copied_or_pickled_row_keeps_sharing_the_empty_mapping():
    row = Row("a", "A")
    for copied in (copy.deepcopy(row), pickle.loads(pickle.dumps(row))):
        assert copied.macs_by_dtype is row.macs_by_dtype
        add_macs_to(copied, "float32", 3)
        assert copied.macs_by_dtype == {"float32": 3} and row.macs_by_dtype == {}
    own = copy.copy(row.macs_by_dtype)
    own["float32"] = 1  # a shallow copy is the caller's own dict
    assert row.macs_by_dtype == {}
