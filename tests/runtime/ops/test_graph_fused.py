"""The fused elementwise op that the graph fusion pass emits (flopcount/runtime/graph/fused.py)."""

import numpy as np

from flopcount.runtime.graph.fused import fused_elementwise
from opcheck import Example, op_costs, randn, run_example

import flopcount.runtime as rt

# tanh(a * b + a) over a (2, 3) output: mul 6 + add 6 + tanh 6 FLOPs, no MACs
_STEPS = [("mul", (0, 1), {}), ("add", (-1, 0), {}), ("tanh", (-2,), {})]

EXAMPLES = {
    "fused_elementwise": Example(lambda a, b: fused_elementwise(a, b, steps=_STEPS),
                                 [randn(2, 3), randn(3, seed=1)],
                                 lambda a, b: np.tanh(a * b + a), macs=0, flops=18),
}


def test_example():
    run_example("fused_elementwise", EXAMPLES["fused_elementwise"])


def test_bytes_are_only_external_inputs_and_output():
    a, b = rt.randn(2, 3), rt.randn(3)
    cost = op_costs(lambda: fused_elementwise(a, b, steps=_STEPS))["fused_elementwise"]
    assert (cost.bytes_read, cost.bytes_written) == ((6 + 3) * 4, 6 * 4)


def test_a_result_read_by_a_later_step_is_not_overwritten():
    # step 2 reads step 0's result after step 1 ran: step 1 must not write into it
    x = randn(3, 4)
    steps = [("exp", (0,), {}), ("neg", (-1,), {}), ("add", (-1, -2), {})]
    out = fused_elementwise(rt.tensor(x), steps=steps).numpy()
    np.testing.assert_allclose(out, np.zeros_like(x), atol=0)


def test_own_kernel_steps_and_clamp_attrs():
    x = randn(4, 5)
    steps = [("sigmoid", (0,), {}), ("clamp", (-1,), {"min": 0.2, "max": 0.7}), ("rsqrt", (-2,), {})]
    out = fused_elementwise(rt.tensor(x), steps=steps).numpy()
    expected = 1 / np.sqrt(np.clip(1 / (1 + np.exp(-x)), 0.2, 0.7))
    np.testing.assert_allclose(out, expected, rtol=1e-12)


def test_fused_parts_give_each_step_with_its_shapes():
    from flopcount.runtime.graph.fused import fused_parts

    a, b = rt.randn(2, 3), rt.randn(3)
    parts = fused_parts((a, b), _STEPS)
    assert [(op.name, spec.shape, [tuple(s.shape) for s in ins]) for op, spec, ins, _ in parts] == [
        ("mul", (2, 3), [(2, 3), (3,)]), ("add", (2, 3), [(2, 3), (2, 3)]), ("tanh", (2, 3), [(2, 3)])]
