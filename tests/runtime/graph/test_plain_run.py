"""A graph run that nothing watches (flopcount/runtime/graph/plain_run.py) gives the node-by-node
run's results bit for bit, and steps aside wherever the node-by-node run is observable."""

from __future__ import annotations

import numpy as np
import pytest

import flopcount.runtime as rt
from flopcount.runtime import cpu_kernels
from flopcount.runtime.graph import plain_run


class _Block(rt.nn.Module):
    """Convs followed by SiLU written as x·sigmoid(x), ReLU (a depthwise conv) and hardswish (no
    bias), residual adds (then ReLU, and alone, the conv second and without bias), a
    squeeze-and-excitation scale (a broadcast multiply), a conv read twice, a split into two
    outputs (a multi-output node) and a chain of elementwise ops."""

    def __init__(self):
        super().__init__()
        self.conv = rt.nn.Conv2d(4, 6, 3, padding=1)
        self.depthwise = rt.nn.Conv2d(6, 6, 3, padding=1, groups=6)
        self.pointwise = rt.nn.Conv2d(6, 6, 1, bias=False)
        self.squeeze = rt.nn.Conv2d(6, 6, 1)
        self.block_end = rt.nn.Conv2d(6, 6, 3, padding=1)
        self.shortcut = rt.nn.Conv2d(6, 6, 1, bias=False)

    def forward(self, x):
        y = self.conv(x)
        y = y * rt.sigmoid(y)
        y = rt.relu(self.depthwise(y))
        y = rt.nn.functional.hardswish(self.pointwise(y))
        y = rt.relu(self.block_end(y) + y)
        y = y + self.shortcut(y)
        s = rt.sigmoid(self.squeeze(y.mean(dim=(2, 3), keepdim=True)))
        y = y * s
        a, b = y.split(3, dim=1)
        return (a.exp() + 1.0).relu(), b.tanh() * 0.5


def _graph():
    rt.manual_seed(0)
    return rt.GraphModule(rt.trace(_Block(), rt.randn(2, 4, 9, 9)))


def _node_by_node(graph, x):
    return graph.run(x, before=lambda node, inputs: None)


@pytest.mark.parametrize("path", ["compiled", "numpy"])
def test_plain_run_gives_the_node_by_node_results_bit_for_bit(path):
    graph, x = _graph(), rt.randn(2, 4, 9, 9)
    context = cpu_kernels.numpy_only() if path == "numpy" else _nothing()
    with context, rt.no_grad():
        plain = graph(x)
        assert "plain_program" in graph.cache  # the plain run is what ran
        reference = _node_by_node(graph, x)
    for got, want in zip(plain, reference):
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_plain_run_fuses_the_silu_and_leaves_the_graph_as_it_is():
    graph, x = _graph(), rt.randn(2, 4, 9, 9)
    before = [n.op_name for n in graph.graph.nodes]
    with rt.no_grad():
        graph(x)
    assert [n.op_name for n in graph.graph.nodes] == before  # counting reads this graph: unchanged
    steps = graph.cache["plain_program"].steps
    fused = [n.attrs["steps"] for n, *_ in steps if n.op_name == "fused_elementwise"]
    assert (("exp", (0,), {}), ("add", (-1, 1), {}), ("relu", (-2,), {})) in fused
    # each conv read only by its activation or residual add runs it in the same step (the
    # squeeze's sigmoid, followed by a broadcast multiply, is no such activation)
    after_conv = [getattr(kernel, "activation", None) for node, kernel, *_ in steps if node.op_name == "conv"]
    assert after_conv == ["silu", "relu", "hardswish", "add, relu", "add", None]


def test_observed_runs_and_gradients_go_node_by_node():
    graph, x = _graph(), rt.randn(2, 4, 9, 9)
    seen = []

    class Observer:
        def on_op(self, event):
            seen.append(event.op.name)

    with rt.no_grad(), rt.observe(Observer()):
        graph(x)
    assert seen == [n.op_name for n in graph.graph.nodes]
    assert "plain_program" not in graph.cache
    x.requires_grad = True
    out = graph(x)  # gradients on: the tape needs every node
    (out[0].sum() + out[1].sum()).backward()
    assert x.grad is not None and "plain_program" not in graph.cache


def test_a_weight_swapped_after_tracing_is_still_named_by_its_node():
    graph = rt.trace(rt.nn.Sequential(rt.nn.Linear(4, 3), rt.nn.ReLU(), rt.nn.Linear(3, 2)), rt.randn(5, 4))
    graph.tensors["2.weight"] = rt.randn(2, 7)
    with rt.no_grad(), pytest.raises(rt.ShapeError, match="while executing %linear_1"):
        rt.GraphModule(graph)(rt.randn(5, 4))


def test_half_precision_graphs_keep_the_node_by_node_rounding():
    graph = rt.trace(lambda x: (x * 3.0 + 1.0).sigmoid(), rt.randn(8).to(rt.float16))
    assert not plain_run.applies(graph, {}, [rt.randn(8).to(rt.float16)], None, None, False)


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def test_the_measured_peak_leaves_out_building_the_node_by_node_program():
    # the measurement's warm-up run must build the program the measured run uses: were it a
    # plain run, the node-by-node program (lists, memory plan) would be built while measuring
    from flopcount.graph_parser import execution
    from flopcount.runtime.device import CPU

    rt.manual_seed(0)
    model = rt.nn.Sequential(*[m for _ in range(20) for m in (rt.nn.Linear(64, 64), rt.nn.ReLU())])
    x = rt.randn(8, 64)
    runnable = rt.GraphModule(rt.trace(model, x))
    first = execution.measure_peak(runnable, (x,), {}, CPU)
    second = execution.measure_peak(runnable, (x,), {}, CPU)  # every program built by now
    assert abs(first[0] - second[0]) < 1024 and abs(first[1] - second[1]) < 1024, (first, second)


class _Projections(rt.nn.Module):
    """Matmuls followed by a bias add, the bias on either side, as exporters write linear layers,
    then a residual add of the matmul's full shape, and a matmul read twice (no epilogue)."""

    def __init__(self):
        super().__init__()
        self.w1, self.b1 = rt.nn.Parameter(rt.randn(8, 16)), rt.nn.Parameter(rt.randn(16))
        self.w2, self.b2 = rt.nn.Parameter(rt.randn(16, 8)), rt.nn.Parameter(rt.randn(1, 8))
        self.w3 = rt.nn.Parameter(rt.randn(8, 8))

    def forward(self, x):
        h = rt.matmul(x, self.w1) + self.b1
        y = self.b2 + rt.matmul(h, self.w2)
        y = rt.matmul(y, self.w3) + y
        z = rt.matmul(y, self.w3)
        return z + z


def test_a_matmul_adds_its_bias_in_place_with_the_node_by_node_bits():
    rt.manual_seed(1)
    graph, x = rt.GraphModule(rt.trace(_Projections(), rt.randn(3, 5, 8))), rt.randn(3, 5, 8)
    with rt.no_grad():
        plain = graph(x)
        reference = _node_by_node(graph, x)
    np.testing.assert_array_equal(plain.numpy(), reference.numpy())
    steps = graph.cache["plain_program"].steps
    after_matmul = [getattr(kernel, "activation", None) for node, kernel, *_ in steps if node.op_name == "matmul"]
    assert after_matmul == ["bias", "bias", "bias", None]
