"""The graph view's scope rows: siblings in the order their first node runs, modules that ran
nothing last, and a scope's shapes as a module call's (each outside value once)."""

import flopcount.runtime as rt
from flopcount.graph_parser import profile_graph

nn = rt.nn


class Inner(nn.Module):
    def forward(self, x):
        return x.relu()


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.unused = nn.Linear(2, 2)  # registered first, runs nothing
        self.inner = Inner()

    def forward(self, x, y):
        z = (x * x) + (x + y)  # x read twice by one node, and by two nodes
        return self.inner(z), self.inner(y)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.after = nn.Linear(3, 3)  # registered before block, runs after it
        self.block = Block()

    def forward(self, x, y):
        a, b = self.block(x, y)
        return self.after(a) * y + b.sum()  # y is read inside block and outside it


def test_scope_rows_order_and_shapes():
    x, y = (2, 3), (1, 3)
    report = profile_graph(Net(), (rt.randn(*x), rt.randn(*y)))
    assert [r.name for r in report.rows] == [
        "", "block", "block/mul", "block/add", "block/add_1", "block.inner", "block.inner/relu",
        "block.inner/relu_1", "block.unused", "after", "after/linear", "/mul_1", "/sum", "/add_2"]
    shapes = {r.name: (r.input_shapes, r.output_shapes) for r in report.rows if r.kind == "scope"}
    assert shapes == {
        "": ((x, y), (x,)),
        "block": ((x, y), (x, y)),           # x once, though three reads of it are inside
        "block.inner": ((x, y), (x, y)),     # two calls of one module: one scope
        "block.unused": ((), ()),
        "after": ((x,), (x,)),
    }
    assert report.row("block.inner").calls == 1 and report.row("block.unused").calls == 0
