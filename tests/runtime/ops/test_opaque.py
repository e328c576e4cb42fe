"""opaque: a model file's node with no op in the runtime keeps its shapes, refuses to run, and
has no cost rule (reports list it as unsupported)."""

import pytest

import flopcount.runtime as rt
from flopcount.runtime.ops.opaque import opaque
from opcheck import Example


def _node(x):
    return opaque(x, label="ONNX Foo", node="foo_1", outputs=[((3, 2), "float32"), ((3,), "int64")])


# it has no kernel: its example is checked on meta and for the refusal, not by run_example
EXAMPLES = {"opaque": Example(_node, [None], runs=False)}


def test_shapes_on_meta_and_a_refusal_naming_the_node_when_run():
    values, ids = _node(rt.ones(4).to("meta"))
    assert (values.shape, values.dtype, ids.shape, ids.dtype) == ((3, 2), rt.float32, (3,), rt.int64)
    with pytest.raises(rt.UnsupportedOpError, match=r"ONNX Foo node 'foo_1' cannot run: flopcount has no kernel"):
        _node(rt.ones(4))


def test_no_cost_rule_so_a_graph_counts_it_as_zero():
    graph = rt.trace(lambda x: _node(x * 2)[0].sum(), rt.ones(4).to("meta"))
    assert [n.op_name for n in graph.nodes] == ["mul", "opaque", "sum"]
    assert graph.cost().flops == 4 + 6
