"""rt.compile(module) and rt.set_mode("graph"): compile on first call per signature, equal eager."""

import threading

import numpy as np
import pytest

import flopcount.runtime as rt
from flopcount.runtime.graph import LazyGraph, trace as trace_module
from graph_models import Attention, MLP, SmallCNN, assert_close, randomize_norms

nn = rt.nn


@pytest.fixture
def count_traces(monkeypatch):
    """How many times the lazy path traced a model."""
    from flopcount.runtime.graph import lazy

    calls = []

    def counting(fn, *args, **kwargs):
        calls.append(type(fn).__name__)
        return trace_module(fn, *args, **kwargs)

    monkeypatch.setattr(lazy, "trace", counting)
    return calls


@pytest.fixture
def graph_mode():
    previous = rt.set_mode("graph")
    yield
    rt.set_mode(previous)


def test_graph_of_a_module_compiles_once_per_signature(count_traces):
    model = MLP()
    net = rt.compile(model)
    assert isinstance(net, LazyGraph) and "not compiled" in repr(net)
    x = rt.randn(2, 4)
    assert_close(net(x), model(x))
    z = rt.randn(2, 4)
    assert_close(net(z), model(z))  # same signature: the compiled graph runs again
    assert count_traces == ["MLP"]
    y = rt.randn(5, 4)
    assert_close(net(y), model(y))  # a new shape: traced again
    assert count_traces == ["MLP", "MLP"]
    assert str(net).startswith("graph MLP(%x: float32[5, 4])")


def test_lazy_graph_is_optimized_and_folds_batch_norm_when_asked():
    model = SmallCNN().eval()
    randomize_norms(model)
    x = rt.randn(2, 3, 16, 16)
    plain, folded = rt.compile(model), rt.compile(model, fold_bn=True)
    assert_close(plain(x), model(x))
    assert_close(folded(x), model(x))
    ops = [n.op_name for n in folded.graph.nodes]
    assert "batch_norm" not in ops and "fused_elementwise" in ops
    assert [n.op_name for n in plain.graph.nodes].count("batch_norm") == 3


def test_training_flag_is_part_of_the_signature(count_traces):
    model = Attention()
    net = rt.compile(model)
    x = rt.randn(2, 5, 16)
    net(x)
    model.eval()
    net(x)
    assert count_traces == ["Attention", "Attention"]


def test_set_mode_graph_runs_top_level_calls_through_compiled_graphs(count_traces, graph_mode):
    model = Attention()
    x = rt.randn(2, 5, 16)
    out = model(x)
    model(x)
    assert count_traces == ["Attention"]  # submodules are part of the one graph
    rt.set_mode("eager")
    assert_close(out, model(x))
    assert count_traces == ["Attention"]


def test_set_mode_keeps_hooks_and_training_batch_norm_eager(count_traces, graph_mode):
    model = MLP()
    seen = []
    handle = model.fc1.register_forward_hook(lambda m, args, out: seen.append(out.shape))
    model(rt.randn(2, 4))
    assert seen == [(2, 8)] and count_traces == []
    handle.remove()

    class Calls:
        seen = []

        def record_call(self, module, args, kwargs):
            self.seen.append(type(module).__name__)
            return module.forward(*args, **kwargs)

    with rt.nn.observe_module_calls(Calls()) as calls:
        model(rt.randn(2, 4))
    assert "Linear" in calls.seen and count_traces == []  # an observed call runs eagerly
    cnn = SmallCNN().train()
    before = cnn.bn.running_mean.numpy().copy()
    cnn(rt.randn(4, 3, 8, 8))
    assert count_traces == [] and not np.allclose(before, cnn.bn.running_mean.numpy())


def test_graph_mode_belongs_to_the_thread_that_set_it(count_traces, graph_mode):
    model = MLP()
    x = rt.randn(2, 4)
    seen = []

    def other_thread():
        seen.append(rt.get_mode())
        model(x)                        # this thread never set graph mode: an eager call
        seen.append(rt.set_mode("graph"))
        model(x)                        # now it has: traced here

    worker = threading.Thread(target=other_thread)
    worker.start()
    worker.join()
    assert seen == ["eager", "eager"] and count_traces == ["MLP"]
    assert rt.get_mode() == "graph"     # the worker's calls left this thread's mode alone
    rt.set_mode("eager")
    model(x)
    assert count_traces == ["MLP"]


def test_gradients_flow_through_graph_mode(graph_mode):
    model = MLP()
    x = rt.randn(3, 4)
    model(x).sum().backward()
    grads = [p.grad.numpy().copy() for p in model.parameters()]
    rt.set_mode("eager")
    model.zero_grad()
    model(x).sum().backward()
    for g, p in zip(grads, model.parameters()):
        np.testing.assert_allclose(g, p.grad.numpy(), rtol=1e-6)


def test_set_mode_rejects_unknown_modes():
    with pytest.raises(ValueError, match="eager"):
        rt.set_mode("jit")
    assert rt.get_mode() == "eager"
