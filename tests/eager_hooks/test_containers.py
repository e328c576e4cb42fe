"""A container that is never called (ModuleList) shows the sum of its children in the eager
view — bytes included — so its row equals the graph view's scope row."""

import flopcount
import flopcount.runtime as rt
from flopcount.runtime import nn


class Stack(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(4, 4), nn.Linear(4, 4)])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


def test_an_uncalled_container_sums_its_children_bytes():
    x = rt.randn(2, 4)
    eager = flopcount.profile(Stack(), x, mode="eager")
    graph = flopcount.profile(Stack(), x, mode="graph")
    # each linear reads x (2x4), weight (4x4) and bias (4) and writes 2x4, all float32
    per_layer_read, per_layer_written = 4 * (8 + 16 + 4), 4 * 8
    row = eager.row("layers")
    assert (row.bytes_read, row.bytes_written) == (2 * per_layer_read, 2 * per_layer_written)
    assert (row.bytes_read, row.bytes_written) == (graph.row("layers").bytes_read, graph.row("layers").bytes_written)
    assert (row.macs, row.flops) == (2 * 2 * 16, 2 * (2 * 2 * 16 + 8))
