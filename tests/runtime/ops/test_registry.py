"""Every registered op has its four rules and a checked example in one of the op test files."""

import importlib.util
import pathlib

import flopcount.runtime as rt
from flopcount.runtime.registry import RULES, register_op, Op

import pytest


def _all_examples() -> dict:
    examples = {}
    for path in sorted(pathlib.Path(__file__).parent.glob("test_*.py")):
        if path.stem == "test_registry":
            continue
        module = _load(path)
        for name in getattr(module, "EXAMPLES", {}):
            assert name not in examples, f"two test files give an example for {name!r}"
            examples[name] = path.name
    return examples


def _load(path):
    spec = importlib.util.spec_from_file_location(f"_opexamples_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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
    examples = _all_examples()
    missing = sorted(set(rt.registered_ops()) - set(examples))
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
