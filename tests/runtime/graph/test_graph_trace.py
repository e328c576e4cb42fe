"""rt.trace: what a graph records, how it prints, and that running it equals eager."""

import numpy as np
import pytest

import flopcount.runtime as rt
from flopcount.runtime.graph import TraceError
from graph_models import SMALL_MODELS, MLP, SmallCNN, assert_close, randomize_norms
from peak_memory import traced_peak

nn = rt.nn
F = rt.nn.functional


@pytest.mark.parametrize("make,shape", SMALL_MODELS)
def test_traced_graph_equals_eager(make, shape):
    model = make()
    randomize_norms(model)
    x = rt.randn(*shape)
    graph = rt.trace(model, x)
    assert_close(rt.GraphModule(graph)(x), model(x))
    y = rt.randn(*shape)  # a graph is not tied to its example values
    assert_close(rt.GraphModule(graph)(y), model(y))


GOLDEN_MLP = """\
graph MLP(%x: float32[2, 4]):
  param %fc1.weight: float32[8, 4]
  param %fc1.bias: float32[8]
  param %fc2.weight: float32[3, 8]
  param %fc2.bias: float32[3]
  const %c: float32[] = 2.0
  %linear: float32[2, 8] = linear(%x, %fc1.weight, %fc1.bias)  # fc1: Linear
  %relu: float32[2, 8] = relu(%linear)  # act: ReLU
  %linear_1: float32[2, 3] = linear(%relu, %fc2.weight, %fc2.bias)  # fc2: Linear
  %mul: float32[2, 3] = mul(%linear_1, %c)  # MLP
  return %mul"""


def test_printed_graph_matches_golden_text():
    assert str(rt.trace(MLP(), rt.randn(2, 4))) == GOLDEN_MLP


def test_nodes_carry_op_scope_module_type_and_values():
    model = SmallCNN().eval()
    graph = rt.trace(model, rt.randn(1, 3, 8, 8))
    conv = [n for n in graph.nodes if n.scope == "block.conv2"]
    assert [n.op_name for n in conv] == ["conv"] and conv[0].module_type == "Conv2d"
    node = conv[0]
    assert [v.name for v in node.inputs[1:]] == ["block.conv2.weight", "block.conv2.bias"]
    assert node.outputs[0].shape == (1, 8, 4, 4) and node.outputs[0].dtype is rt.float32
    assert node.attrs["stride"] == (1, 1) and node.attrs["groups"] == 1
    kinds = {name: v.kind for name, v in graph.parameters.items()}
    assert kinds["block.bn1.running_mean"] == "buffer" and kinds["block.bn1.weight"] == "param"
    assert graph.tensors["fc.weight"] is model.fc.weight  # the module's own tensors, not copies
    residual = [n for n in graph.nodes if n.op_name == "add"]
    assert [(n.scope, n.module_type) for n in residual] == [("block", "Block")]


def test_outputs_may_be_tuples_lists_and_dicts_with_kwargs_inputs():
    def fn(x, scale=None, pair=None):
        return {"sum": x + pair[0], "rest": [x * scale, (pair[1].exp(), 3)]}

    x, s, a, b = rt.randn(2), rt.randn(2), rt.randn(2), rt.randn(2)
    graph = rt.trace(fn, x, scale=s, pair=(a, b))
    assert [v.name for v in graph.inputs] == ["x", "scale", "pair_0", "pair_1"]
    out = rt.GraphModule(graph)(x, scale=s, pair=(a, b))
    ref = fn(x, scale=s, pair=(a, b))
    assert set(out) == {"sum", "rest"} and out["rest"][1][1] == 3
    assert_close(out["sum"], ref["sum"])
    assert_close(out["rest"][0], ref["rest"][0])
    assert_close(out["rest"][1][0], ref["rest"][1][0])


def test_constant_arithmetic_folds_at_trace_time():
    def fn(x):
        n = rt.tensor(x.shape[1]) * 2 + 1          # shape arithmetic on constants
        idx = rt.arange(3) * 2                     # a factory, then an op on it
        return x.reshape(int(n.item()) - 1) + idx.sum().to(rt.float32)

    graph = rt.trace(fn, rt.randn(2, 3))
    assert [n.op_name for n in graph.nodes] == ["reshape", "add"]
    const = graph.nodes[1].inputs[1]
    assert const.kind == "const" and graph.tensors[const.name].item() == 6.0
    x = rt.randn(2, 3)
    assert_close(rt.GraphModule(graph)(x), fn(x))


def test_random_ops_are_recorded_not_folded():
    graph = rt.trace(lambda x: x + F.dropout(rt.ones(1000), p=0.5, training=True), rt.zeros(1000))
    assert [n.op_name for n in graph.nodes] == ["dropout", "add"]
    first, second = rt.GraphModule(graph)(rt.zeros(1000)).numpy(), rt.GraphModule(graph)(rt.zeros(1000)).numpy()
    assert set(np.unique(first)) <= {0.0, 2.0} and not np.array_equal(first, second)


def test_input_shape_mismatch_is_named():
    graph = rt.trace(MLP(), rt.randn(2, 4))
    with pytest.raises(rt.ShapeError, match=r"input %x expects float32\[2, 4\], got float32\[3, 4\]"):
        rt.GraphModule(graph)(rt.randn(3, 4))


def test_a_meta_tensor_from_nowhere_is_refused():
    stray = rt.zeros(100_000, device="meta")  # too large to carry a value: it has no data
    with pytest.raises(TraceError, match=r"meta tensor of shape \(100000,\) with no data"):
        rt.trace(lambda x: x + stray, rt.zeros(100_000))


def test_a_function_closing_over_a_module_gets_its_scopes_and_parameters():
    model = MLP()
    graph = rt.trace(lambda x: model(x).relu(), rt.randn(2, 4))
    assert [n.scope for n in graph.nodes] == ["fc1", "act", "fc2", "", ""]
    assert list(graph.parameters) == ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]


def test_executor_callbacks_and_observers_see_every_node_with_its_scope():
    model = MLP()
    graph = rt.trace(model, rt.randn(2, 4))
    calls = []
    rt.GraphModule(graph).run(rt.randn(2, 4), before=lambda node, ins: calls.append(("before", node.op_name, len(ins))),
              after=lambda node, outs: calls.append(("after", node.op_name, outs[0].shape)))
    assert calls[:2] == [("before", "linear", 3), ("after", "linear", (2, 8))]
    assert len(calls) == 2 * len(graph.nodes)

    class Recorder:
        def __init__(self):
            self.events = []

        def on_op(self, event):
            self.events.append((event.op.name, event.module))

    rec = Recorder()
    with rt.observe(rec):
        rt.GraphModule(graph)(rt.randn(2, 4))
    assert rec.events == [("linear", "fc1"), ("relu", "act"), ("linear", "fc2"), ("mul", None)]


def test_gradients_through_the_graph_equal_eager():
    model = MLP()
    x = rt.randn(2, 4)
    graph = rt.trace(model, x)
    rt.GraphModule(graph)(x).sum().backward()
    from_graph = {n: p.grad.numpy().copy() for n, p in model.named_parameters()}
    model.zero_grad()
    model(x).sum().backward()
    for name, p in model.named_parameters():
        np.testing.assert_allclose(from_graph[name], p.grad.numpy(), rtol=1e-6)


def test_meta_inputs_run_the_graph_by_shape_and_to_moves_parameters():
    gm = rt.GraphModule(rt.trace(MLP(), rt.randn(2, 4)))
    out = gm(rt.randn(2, 4, device="meta"))
    assert out.device.type == "meta" and out.shape == (2, 3)
    gm.to("meta")
    assert all(gm.graph.tensors[n].data is None for n in gm.graph.parameters)
    with pytest.raises(rt.DeviceError, match="call graph.to"):
        gm(rt.randn(2, 4))


def test_a_graph_is_data_and_a_graph_module_runs_it():
    model, x = MLP(), rt.randn(2, 4)
    graph = rt.trace(model, x)
    assert isinstance(graph, rt.Graph) and not callable(graph) and not hasattr(graph, "run")
    gm = rt.GraphModule(graph)
    assert_close(gm(x), model(x))
    assert gm.to("meta") is gm and gm.graph is not graph and gm.graph.device.type == "meta"
    # moving the module's graph leaves the traced graph (and its nodes' order) as it was
    assert all(graph.tensors[n].data is not None for n in graph.parameters)
    assert [n.name for n in gm.graph.nodes] == [n.name for n in graph.nodes]
    with pytest.raises(TypeError, match="expects a Graph.*MLP"):
        rt.GraphModule(model)


def test_meta_trace_of_a_large_model_is_allocation_free():
    # 1.34 billion parameters: 40 blocks of width 2048 with a 4x MLP (33.6 M each)
    with rt.meta():
        layers = []
        for _ in range(40):
            layers += [nn.Linear(2048, 8192), nn.ReLU(), nn.Linear(8192, 2048)]
        model = nn.Sequential(*layers)
    x = rt.randn(8, 512, 2048, device="meta")
    with traced_peak() as memory:
        graph = rt.trace(model, x)
    params = sum(v.numel() for v in graph.parameters.values())
    assert params == 40 * (2 * 2048 * 8192 + 8192 + 2048) and len(graph.nodes) == 120
    assert memory.peak < 2 * 1024 * 1024, f"tracing allocated {memory.peak} bytes at its peak"


def test_reading_a_traced_value_is_explained():
    def fn(x):
        return x * 2.0 if float(x.sum()) > 0 else x

    with pytest.raises(TraceError, match="reads a value that the graph computes"):
        rt.trace(fn, rt.randn(3))


def test_assigning_into_a_constant_after_use_does_not_change_earlier_reads():
    def fn(x):
        c = rt.zeros(3)
        y = x + c
        c[0] = 5.0  # c now refers to a new array; y still read the zeros
        return y * c

    x = rt.randn(3)
    graph = rt.trace(fn, x)
    np.testing.assert_array_equal(rt.GraphModule(graph)(x).numpy(), fn(x).numpy())


def test_constants_moved_to_the_meta_inputs_device_keep_their_values():
    big = np.arange(300 * 300, dtype=np.float32).reshape(300, 300)  # larger than a meta value

    def fn(x):
        a = rt.tensor(big, device=x.device)
        b = rt.tensor(big).to(x.device)
        return x + a - b * 0.5

    graph = rt.trace(fn, rt.zeros(300, 300, device="meta"))
    x = rt.randn(300, 300)
    np.testing.assert_array_equal(rt.GraphModule(graph)(x).numpy(), fn(x).numpy())
    np.testing.assert_allclose(rt.GraphModule(graph)(x).numpy(), x.numpy() + 0.5 * big, rtol=1e-6)


def test_named_scopes_extend_module_paths():
    class Inner(nn.Module):
        def forward(self, x):
            with rt.named_scope("gate"):
                return x.sigmoid()

    class Outer(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = Inner()

        def forward(self, x):
            return self.inner(x) * x

    graph = rt.trace(Outer(), rt.randn(3))
    assert [(n.scope, n.module_type) for n in graph.nodes] == [("inner.gate", "Inner"), ("", "Outer")]

    def imported(x):  # how a converter names nodes that no module runs
        with rt.named_scope("/layer1/conv"):
            return x.relu()

    assert [n.scope for n in rt.trace(imported, rt.randn(3)).nodes] == ["/layer1/conv"]


def test_detach_keeps_the_traced_value():
    # logsumexp detaches its running max; the traced graph must still compute it
    x = rt.randn(3, 5)
    graph = rt.trace(lambda t: rt.logsumexp(t, 1), x)
    expected = np.log(np.exp(x.numpy()).sum(1))
    np.testing.assert_allclose(rt.GraphModule(graph)(x).numpy(), expected, rtol=1e-5)
