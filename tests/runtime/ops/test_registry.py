"""Every registered op has its four rules and a checked example in one of the op test files."""

import flopcount.runtime as rt
from flopcount.runtime import registry
from flopcount.runtime.registry import RULES, register_op, Op

import pytest

from opcheck import all_examples


# ops whose work is unknown by nature: a model file's node no op stands for (reports list it
# as unsupported rather than count a guess)
UNCOUNTED = {"opaque"}


def test_every_op_has_all_rules():
    for name, op in rt.registered_ops().items():
        for rule in RULES:
            assert hasattr(op, rule), f"{name} lacks {rule}"
        assert op.shape is not None, f"{name}: shape cannot be None"
        assert op.cost is not None or name in UNCOUNTED, f"{name}: cost cannot be None"


def test_every_op_has_a_checked_example():
    missing = sorted(set(rt.registered_ops()) - set(all_examples()))
    assert not missing, f"ops without an example in tests/runtime/ops: {missing}"


def test_register_refuses_duplicates_and_missing_rules():
    with pytest.raises(ValueError, match="already registered"):
        @register_op("add")
        class Again(Op):
            def shape(x): ...
            def forward(xp, x): ...
            def vjp(g, out, x): ...
            def cost(out, x): ...

    with pytest.raises(TypeError, match="lacks rule"):
        @register_op("no_cost_rule_op")
        class NoCost(Op):
            def shape(x): ...
            def forward(xp, x): ...
            def vjp(g, out, x): ...


@pytest.mark.parametrize("rule", ["shape", "cost"])
def test_register_refuses_a_shape_or_cost_rule_set_to_none(rule):
    rules = {"shape": lambda x: x, "forward": lambda xp, x: x, "vjp": None, "cost": lambda out, x: None}
    rules[rule] = None
    with pytest.raises(TypeError, match=rf"sets \['{rule}'\] to None"):
        register_op(f"{rule}_set_to_none_op")(type("Refused", (Op,), rules))
    assert f"{rule}_set_to_none_op" not in rt.registered_ops()


def test_gradient_ops_say_so():
    # a gradient op is named for its forward op (max_pool_backward, conv_weight_grad) and says it
    # is one: exporters skip it and the ptflops convention counts its own MACs
    flagged = {name for name, op in rt.registered_ops().items() if op.backward}
    named = {name for name in rt.registered_ops() if name.endswith(("_backward", "_grad"))}
    assert flagged == named


def test_every_onnx_property_names_an_onnx_operator():
    # export writes Op.onnx as one node: a misspelt name would only fail when a file is written
    defs = pytest.importorskip("onnx.defs")
    wrong = {name: op.onnx for name, op in rt.registered_ops().items()
             if op.onnx is not None and not defs.has(op.onnx)}
    assert not wrong, f"ops whose onnx property is not an ONNX operator: {wrong}"


def test_register_sets_properties_and_refuses_unknown_ones():
    rules = {"shape": lambda x: x, "forward": lambda xp, x: x, "vjp": None, "cost": lambda out, x: None}
    with pytest.raises(TypeError, match=r"op 'misspelt_property_op': \['onxx'\] are not op properties"):
        register_op("misspelt_property_op", onxx="Relu")
    assert "misspelt_property_op" not in rt.registered_ops()
    op = register_op("property_op", onnx="Identity", ptflops="zero")(type("WithProperties", (Op,), rules))
    try:
        assert (op.onnx, op.ptflops, Op.onnx, Op.ptflops) == ("Identity", "zero", None, None)
    finally:
        del registry._REGISTRY["property_op"]  # a test op: not left for the every-op tests
