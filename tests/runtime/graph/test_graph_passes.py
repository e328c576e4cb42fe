"""Graph passes, each on its own: dce, constant folding, conv+BN folding, elementwise fusion."""

import numpy as np
import pytest

import flopcount.runtime as rt
from flopcount.runtime.graph import passes
from graph_models import SMALL_MODELS, SmallCNN, assert_close, randomize_norms
from peak_memory import traced_peak

nn = rt.nn


def _ops(graph):
    return [n.op_name for n in graph.nodes]


# --- dead code -----------------------------------------------------------------------------------

def test_dce_drops_unused_nodes_parameters_and_constants():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.used = nn.Linear(3, 3)
            self.unused = nn.Linear(3, 3)

        def forward(self, x):
            (x * 5.0).exp()  # computed, never returned: dead code for the pass
            return self.used(x)

    graph = rt.trace(Net(), rt.randn(2, 3))
    assert _ops(graph) == ["mul", "exp", "linear"] and len(graph.constants) == 1
    clean = passes.dce(graph)
    assert _ops(clean) == ["linear"]
    assert list(clean.parameters) == ["used.weight", "used.bias"] and not clean.constants
    assert _ops(graph) == ["mul", "exp", "linear"]  # the argument is left as it was
    x = rt.randn(2, 3)
    assert_close(rt.GraphModule(clean)(x), rt.GraphModule(graph)(x))


# --- constant folding ----------------------------------------------------------------------------

def test_constant_fold_turns_parameter_only_subgraphs_into_constants():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(rt.randn(4, 3))

        def forward(self, x):
            return x @ (self.w.T * 2.0)  # depends only on a parameter

    graph = rt.trace(Net(), rt.randn(2, 3))
    assert _ops(passes.constant_fold(graph)) == ["permute", "mul", "matmul"]  # parameters stay
    folded = passes.constant_fold(graph, fold_parameters=True)
    assert _ops(folded) == ["matmul"]
    const = folded.nodes[0].inputs[1]
    assert const.kind == "const" and const.shape == (3, 4) and not folded.parameters
    x = rt.randn(2, 3)
    assert_close(rt.GraphModule(folded)(x), rt.GraphModule(graph)(x))


# --- conv + batch norm folding ---------------------------------------------------------------

def test_fold_conv_bn_equals_eager_and_removes_every_norm():
    model = SmallCNN().eval()
    randomize_norms(model)
    x = rt.randn(2, 3, 16, 16)
    graph = rt.trace(model, x)
    folded = passes.fold_conv_bn(graph)
    assert _ops(graph).count("batch_norm") == 3 and "batch_norm" not in _ops(folded)
    assert _ops(folded).count("conv") == 3
    assert not any("bn" in name for name in folded.parameters)  # norms' tensors are gone
    stem = next(n for n in folded.nodes if n.scope == "stem")
    assert [v.name for v in stem.inputs[1:]] == ["stem.weight_folded", "stem.bias_folded"]
    assert_close(rt.GraphModule(folded)(x), model(x))


def test_fold_conv_bn_formula_on_one_channel_by_hand():
    conv = nn.Conv2d(1, 1, 1, bias=True)
    conv.weight.data[...] = 2.0
    conv.bias.data[...] = 1.0
    bn = nn.BatchNorm2d(1).eval()
    bn.running_mean.copy_(rt.tensor([3.0]))
    bn.running_var.copy_(rt.tensor([4.0 - 1e-5]))
    bn.weight.data[...] = 0.5
    bn.bias.data[...] = 0.25
    folded = passes.fold_conv_bn(rt.trace(nn.Sequential(conv, bn), rt.randn(1, 1, 2, 2)))
    # scale = 0.5 / sqrt(4) = 0.25; weight 2 * 0.25 = 0.5; bias (1 - 3) * 0.25 + 0.25 = -0.25
    np.testing.assert_allclose(folded.tensors["0.weight_folded"].numpy().ravel(), [0.5], rtol=1e-6)
    np.testing.assert_allclose(folded.tensors["0.bias_folded"].numpy(), [-0.25], rtol=1e-6)


def test_fold_conv_bn_leaves_training_norms_and_shared_conv_outputs():
    model = SmallCNN().train()
    graph = rt.trace(model, rt.randn(2, 3, 8, 8))
    assert _ops(passes.fold_conv_bn(graph)).count("batch_norm") == 3  # training: statistics differ

    class Shared(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 3)
            self.bn = nn.BatchNorm2d(4)

        def forward(self, x):
            y = self.conv(x)
            return self.bn(y) + y  # the conv's output is read twice: folding would change y

    graph = rt.trace(Shared().eval(), rt.randn(1, 3, 6, 6))
    assert _ops(passes.fold_conv_bn(graph)) == _ops(graph)


def test_fold_conv_bn_on_a_meta_model_folds_by_shape():
    model = SmallCNN().eval().to("meta")
    folded = passes.fold_conv_bn(rt.trace(model, rt.randn(1, 3, 8, 8, device="meta")))
    assert "batch_norm" not in _ops(folded)
    assert folded.tensors["stem.weight_folded"].device.type == "meta"


# --- elementwise fusion ----------------------------------------------------------------------

def test_fusion_of_a_chain_keeps_outputs_and_sums_the_parts_cost():
    def fn(x, y):
        return ((x * y + 1.0).tanh() - y).relu()

    x, y = rt.randn(4, 5), rt.randn(5)
    graph = rt.trace(fn, x, y)
    fused = passes.fuse_elementwise(graph)
    assert _ops(graph) == ["mul", "add", "tanh", "sub", "relu"] and _ops(fused) == ["fused_elementwise"]
    node = fused.nodes[0]
    assert [s[0] for s in node.attrs["steps"]] == ["mul", "add", "tanh", "sub", "relu"]
    assert node.outputs[0] is graph.nodes[-1].outputs[0]
    np.testing.assert_array_equal(rt.GraphModule(fused)(x, y).numpy(), rt.GraphModule(graph)(x, y).numpy())  # the same ufuncs
    total = graph.cost()
    cost = fused.cost()
    assert (cost.macs, cost.flops) == (total.macs, total.flops) == (0, 5 * 20)
    # bytes: x, y and the constant read once, the output written once
    assert (cost.bytes_read, cost.bytes_written) == ((20 + 5 + 1) * 4, 20 * 4)


def test_fusion_stops_at_values_read_twice_or_returned():
    def fn(x):
        a = x.exp()
        b = a + 1.0        # a is read by b and by the return: a is not fused away
        c = (b * 2.0).neg()
        return a, c

    graph = rt.trace(fn, rt.randn(3))
    fused = passes.fuse_elementwise(graph)
    assert _ops(fused) == ["exp", "fused_elementwise"]
    assert [s[0] for s in fused.nodes[1].attrs["steps"]] == ["add", "mul", "neg"]
    x = rt.randn(3)
    for got, want in zip(rt.GraphModule(fused)(x), rt.GraphModule(graph)(x)):
        np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_fusion_across_module_scopes_takes_the_common_scope_unless_refused():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.act = nn.ReLU()

        def forward(self, x):
            return self.act(x * 3.0) + 1.0  # mul and add run in Net, relu in Net.act

    graph = rt.trace(Net(), rt.randn(4))
    across = passes.fuse_elementwise(graph)
    assert [(n.op_name, n.scope, n.module_type) for n in across.nodes] == [("fused_elementwise", "", "")]
    assert _ops(passes.fuse_elementwise(graph, across_scopes=False)) == ["mul", "relu", "add"]
    cnn = rt.trace(SmallCNN().eval(), rt.randn(1, 3, 8, 8))  # the residual add and relu of the block
    fused = [n for n in passes.fuse_elementwise(cnn, across_scopes=False).nodes if n.op_name == "fused_elementwise"]
    assert [(n.scope, n.module_type, [s[0] for s in n.attrs["steps"]]) for n in fused] == \
        [("block", "Block", ["add", "relu"])]


def test_gradient_through_a_fused_node_equals_eager():
    x = rt.tensor(np.random.default_rng(0).standard_normal((3, 4)), requires_grad=True)
    y = rt.tensor(np.random.default_rng(1).standard_normal(4), requires_grad=True)

    def fn(a, b):
        return (a * b).sigmoid() * a + b

    fused = passes.fuse_elementwise(rt.trace(fn, x, y))
    assert _ops(fused) == ["fused_elementwise"]
    rt.GraphModule(fused)(x, y).sum().backward()
    gx, gy = x.grad.numpy().copy(), y.grad.numpy().copy()
    x.grad = y.grad = None
    fn(x, y).sum().backward()
    np.testing.assert_allclose(gx, x.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(gy, y.grad.numpy(), rtol=1e-12)


def _peak(graph, x):
    with traced_peak() as memory:
        rt.GraphModule(graph)(x)
    return memory.peak


def test_fused_kernel_allocates_one_buffer_for_a_chain():
    def fn(x):
        return ((x * 2.0 + 1.0).exp() - 3.0).tanh()

    x = rt.randn(256, 1024)  # 1 MiB
    graph = rt.trace(fn, x)
    fused = passes.fuse_elementwise(graph)
    unfused_peak, fused_peak = _peak(graph, x), _peak(fused, x)
    mib = 1 << 20
    assert 1.9 * mib < unfused_peak < 2.2 * mib  # each op's input and output alive together
    assert 0.9 * mib < fused_peak < 1.2 * mib    # one buffer, written in place five times


# --- the pipeline --------------------------------------------------------------------------------

@pytest.mark.parametrize("make,shape", SMALL_MODELS)
def test_optimized_graph_equals_eager(make, shape):
    model = make()
    randomize_norms(model)
    x = rt.randn(*shape)
    optimized = passes.optimize(rt.trace(model, x), fold_bn=True)
    assert optimized.memory_plan is not None
    assert_close(rt.GraphModule(optimized)(x), model(x))


_UNARY = ["neg", "abs", "exp", "tanh", "relu", "sigmoid", "sin", "sqrt"]
_BINARY = ["add", "sub", "mul", "div", "maximum", "minimum"]


def _chain_fn(program):
    def fn(x, y):
        for kind, name in program:
            if kind == "unary":
                x = getattr(x, name)()
            else:
                other = {"y": y, "scalar": 0.75, "x": x}[kind]
                x = getattr(rt, name)(x, other)
        return x
    return fn


def test_random_elementwise_chains_fuse_to_identical_results():
    from hypothesis import given, settings, strategies as st

    step = st.one_of(st.tuples(st.just("unary"), st.sampled_from(_UNARY)),
                     st.tuples(st.sampled_from(["y", "scalar", "x"]), st.sampled_from(_BINARY)))

    @settings(max_examples=25, deadline=None)
    @given(st.lists(step, min_size=2, max_size=7), st.sampled_from([(3, 4), (2, 1, 5)]))
    def check(program, shape):
        fn = _chain_fn(program)
        x, y = rt.randn(*shape), rt.randn(shape[-1])
        graph = rt.trace(fn, x, y)
        fused = passes.fuse_elementwise(graph)
        assert len(fused.nodes) <= len(graph.nodes)
        with np.errstate(all="ignore"):  # overflow and nan are fine: both sides must agree
            np.testing.assert_array_equal(rt.GraphModule(fused)(x, y).numpy(), fn(x, y).numpy())
        assert (fused.cost().macs, fused.cost().flops) == (graph.cost().macs, graph.cost().flops)

    check()
