"""The eager view's capture: a real run recorded as a Graph equals the trace of the same model,
node by node (every zoo model: test_views_agree.py), and follows what the run did where a
trace cannot (a branch on a value)."""

import numpy as np

import flopcount.runtime as rt
from flopcount.recording.capture import capture
from flopcount.runtime.graph.equal import first_difference


class _Twice(rt.nn.Module):
    """One Linear called twice, a keyword input, a constant-only mask and the input returned."""

    def __init__(self):
        super().__init__()
        self.fc = rt.nn.Linear(4, 4)
        self.register_buffer("scale", rt.ones(4))

    def forward(self, x, *, bias):
        mask = rt.ones(3, 4) * 2  # from constants only: folded by both views
        y = self.fc(self.fc(x) * self.scale) + bias
        return y * mask, x


def test_a_real_run_captures_what_a_trace_records():
    net, x, bias = _Twice(), rt.randn(3, 4), rt.randn(4)
    eager, traced = capture(net, x, bias=bias), rt.trace(net, x, bias=bias)
    assert first_difference(eager, traced) is None
    assert [(n.op_name, n.scope) for n in eager.nodes] == [
        ("linear", "fc"), ("mul", ""), ("linear", "fc"), ("add", ""), ("mul", "")]
    # the two calls of fc are two calls of the call tree, children of the model's call
    calls = [n.meta["call"] for n in eager.nodes if n.scope == "fc"]
    assert len(set(calls)) == 2
    assert sorted(eager.parameters) == ["fc.bias", "fc.weight", "scale"]
    assert eager.parameters["scale"].kind == "buffer"
    assert [v.kind for v in eager.outputs] == ["node", "input"]
    assert eager.nodes[-1].inputs[1].kind == "const"  # the folded mask


def test_a_branch_on_a_value_is_captured_as_taken():
    class Branch(rt.nn.Module):
        def forward(self, x):
            return x.relu() if float(x.sum().numpy()) > 0 else x.sigmoid()

    positive, negative = rt.tensor(np.ones((2, 2), np.float32)), rt.tensor(-np.ones((2, 2), np.float32))
    assert [n.op_name for n in capture(Branch(), positive).nodes] == ["sum", "relu"]
    assert [n.op_name for n in capture(Branch(), negative).nodes] == ["sum", "sigmoid"]


def test_a_difference_names_the_first_node_that_differs():
    net, x = rt.nn.Sequential(rt.nn.Linear(4, 4), rt.nn.ReLU()), rt.randn(2, 4)
    other = rt.nn.Sequential(rt.nn.Linear(4, 4), rt.nn.GELU())
    said = first_difference(capture(net, x), capture(other, x))
    assert said.startswith("node 1: the first graph has relu in scope '1' (ReLU)")
    assert "the second graph has gelu in scope '1' (GELU)" in said


def test_capture_leaves_the_model_as_it_was():
    net = rt.nn.Sequential(rt.nn.Linear(4, 4), rt.nn.Dropout(0.5))
    net.train()
    graph = capture(net, rt.randn(2, 4))
    assert [n.op_name for n in graph.nodes] == ["linear"]  # eval: dropout is the identity
    assert all(m.training for m in net.modules())


class _MaskedBlock(rt.nn.Module):
    """A Linear, a dropout (no op in eval mode) and a mask made from constants only."""

    def __init__(self):
        super().__init__()
        self.fc = rt.nn.Linear(4, 4)
        self.drop = rt.nn.Dropout(0.1)

    def forward(self, x):
        mask = rt.ones(3, 4).tril()  # folded: neither view counts it, bytes included
        return self.drop(self.fc(x)) * mask


def test_eager_rows_are_the_captured_graphs_rows_plus_what_the_calls_know():
    import flopcount

    net, x = _MaskedBlock(), rt.randn(3, 4)
    eager = {r.name: r for r in flopcount.profile(net, x, mode="eager").rows}
    graph = {r.name: r for r in flopcount.profile(net, x, mode="graph").rows if r.kind != "op"}
    assert list(eager) == ["", "fc", "drop"]  # the model's module order, a dropout included
    for name, row in eager.items():
        expected = graph[name]
        assert (row.macs, row.flops, row.bytes_read, row.bytes_written, row.params) == \
            (expected.macs, expected.flops, expected.bytes_read, expected.bytes_written, expected.params), name
    # the folded tril reads and writes nothing in either view: the root moves the linear's and
    # the multiply's bytes only (hand-derived: 4 bytes a float32)
    linear_bytes = (3 * 4 + 4 * 4 + 4) * 4, 3 * 4 * 4
    mul_bytes = 2 * 3 * 4 * 4, 3 * 4 * 4
    assert (eager[""].bytes_read, eager[""].bytes_written) == (linear_bytes[0] + mul_bytes[0],
                                                                linear_bytes[1] + mul_bytes[1])
    # what only a call knows: the dropout ran no op, yet it was called and returned a 3x4 tensor
    drop = eager["drop"]
    assert (drop.calls, drop.input_shapes, drop.output_shapes, drop.output_bytes) == (1, ((3, 4),), ((3, 4),), 48)
    assert (graph["drop"].calls, graph["drop"].output_bytes) == (0, 0)
