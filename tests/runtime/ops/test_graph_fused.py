"""The fused elementwise op that the graph fusion pass emits (flopcount/runtime/graph/fused.py)."""

import contextlib

import numpy as np
import pytest

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


@pytest.mark.parametrize("numpy_only", [False, True])
@pytest.mark.parametrize("steps", [
    [("sigmoid", (0,), {}), ("mul", (0, -1), {})],  # x·sigmoid(x)
    [("sigmoid", (0,), {}), ("mul", (-1, 0), {})],  # sigmoid(x)·x
    [("add", (0, 1), {}), ("sigmoid", (-1,), {}), ("mul", (-2, -1), {}), ("tanh", (-3,), {})],  # inside a chain
    [("sigmoid", (0,), {}), ("mul", (0, -1), {}), ("add", (-1, -2), {})],  # the sigmoid read again: kept
    [("sigmoid", (0,), {}), ("mul", (1, -1), {})],  # another operand: not a SiLU
])
def test_chains_with_a_silu_give_the_bits_of_their_steps_one_by_one(steps, numpy_only):
    from flopcount.runtime import cpu_kernels
    from flopcount.runtime.registry import get_op

    x, y = randn(64, 33).astype(np.float32), randn(64, 33, seed=1).astype(np.float32)
    context = cpu_kernels.numpy_only() if numpy_only else contextlib.nullcontext()
    with context:
        out = fused_elementwise(rt.tensor(x), rt.tensor(y), steps=steps).numpy()
        results = []
        for name, args, attrs in steps:  # each step's own op, as the unfused graph runs it
            vals = [(x, y)[a] if a >= 0 else results[-1 - a] for a in args]
            results.append(get_op(name)._kernel_by_device["cpu"](np, *vals, **attrs))
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, results[-1])


def test_a_sigmoid_times_its_input_runs_as_one_silu_step():
    from flopcount.runtime.graph.fused import merged_silu

    assert merged_silu([("sigmoid", (0,), {}), ("mul", (-1, 0), {})]) == [("silu", (0,), {})]
    chain = [("add", (0, 1), {}), ("sigmoid", (-1,), {}), ("mul", (-2, -1), {}), ("tanh", (-3,), {})]
    assert merged_silu(chain) == [("add", (0, 1), {}), ("silu", (-1,), {}), ("tanh", (-2,), {})]
    kept = [("sigmoid", (0,), {}), ("mul", (0, -1), {}), ("add", (-1, -2), {})]
    assert merged_silu(kept) == kept


@pytest.mark.parametrize("exponent", [2.0, 3.0, 0.5])
def test_small_powers_in_a_chain_give_the_pow_ops_bits(exponent):
    from flopcount.runtime.registry import get_op

    x = randn(7, 9).astype(np.float32)
    e = np.array(exponent, np.float32)
    # the power of a temporary of the chain, written into that same temporary
    steps = [("exp", (0,), {}), ("pow", (-1, 1), {}), ("add", (-2, 0), {})]
    out = fused_elementwise(rt.tensor(x), rt.tensor(e), steps=steps).numpy()
    pow_kernel = get_op("pow")._kernel_by_device["cpu"]
    np.testing.assert_array_equal(out, pow_kernel(np, np.exp(x), e) + x)
