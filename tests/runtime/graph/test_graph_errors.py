"""Errors say where they happened: the graph node and its module scope (as torch.fx's
interpreter does), or the path of the module running in eager mode."""

from __future__ import annotations

import pytest

import flopcount
import flopcount.runtime as rt
from flopcount.runtime.graph import executor
from flopcount.runtime.graph.executor import NodeScope


def _mlp(second_in: int = 3):
    return rt.nn.Sequential(rt.nn.Linear(4, 3), rt.nn.ReLU(), rt.nn.Sequential(rt.nn.Linear(second_in, 2)))


def test_a_graph_error_names_the_node_and_its_scope():
    graph = rt.trace(_mlp(), rt.randn(5, 4))
    graph.tensors["2.0.weight"] = rt.randn(2, 7)   # weights of the wrong size swapped in after tracing
    with pytest.raises(rt.ShapeError) as info:
        rt.GraphModule(graph)(rt.randn(5, 4))
    message = str(info.value)
    assert message.startswith("linear: input (5, 3) does not fit weight (2, 7)")
    assert message.endswith("(while executing %linear_1 = linear(%relu, %2.0.weight, %2.0.bias) in 2.0 (Linear))")


def test_an_eager_error_names_the_module_path():
    with pytest.raises(rt.ShapeError, match=r"\(in module '2\.0' \(Linear\) of Sequential\)$"):
        _mlp(second_in=5)(rt.randn(5, 4))
    # through profile(), in both views, and said once (the innermost module)
    for mode in ("eager", "graph"):
        with pytest.raises(rt.ShapeError) as info:
            flopcount.profile(_mlp(second_in=5), rt.randn(5, 4), mode=mode)
        assert str(info.value).count("(in module") == 1, str(info.value)


def test_an_error_in_the_outermost_module_names_its_type():
    class Broken(rt.nn.Module):
        def forward(self, x):
            return x.reshape(7)

    with pytest.raises(rt.ShapeError, match=r"\(in Broken\)$"):
        Broken()(rt.randn(2, 3))


def test_other_exceptions_keep_their_message_and_get_a_note():
    class Buggy(rt.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = rt.nn.Sequential(rt.nn.Identity())

        def forward(self, x):
            return self.inner(x) + self.missing   # a bug in the model's code

    with pytest.raises(AttributeError) as info:
        Buggy()(rt.randn(2))
    assert "missing" in str(info.value) and "(in " not in str(info.value)
    assert info.value.__notes__ == ["in Buggy"]


def test_option_errors_keep_their_parts_with_the_context():
    from flopcount.options import Option, option_error
    from flopcount.runtime.errors import add_context

    exc = option_error(rt.ShapeError, "bad ", Option("batch", 0))
    add_context(exc, "in module 'a' (Linear) of Net")
    add_context(exc, "in Net")                      # an outer module: said once, by the innermost
    assert str(exc) == "bad batch=0 (in module 'a' (Linear) of Net)"
    assert exc.parts[-1] == " (in module 'a' (Linear) of Net)"


def test_node_scopes_name_the_node_each_op_came_from():
    graph = rt.trace(_mlp(), rt.randn(5, 4))
    seen = []

    class Scopes:
        def on_op(self, event):
            seen.append(rt.dispatch.state.scope_stack[-1])

    with rt.dispatch.observe(Scopes()):
        executor.run(rt.GraphModule(graph), (rt.randn(5, 4),), {}, node_scopes=True)
    assert seen == [NodeScope("0", 0), NodeScope("1", 1), NodeScope("2.0", 2)]
    assert [str(s) for s in seen] == ["0", "1", "2.0"]     # a scope as the module path it stands for
