"""Elementwise ops: values against numpy, gradients against finite differences, costs."""

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import flopcount.runtime as rt
from opcheck import Example, op_costs, randn, run_example

A, B = randn(3, 4), randn(4, seed=1)
POS = np.abs(randn(3, 4)) + 0.5
N = 12  # numel of the (3, 4) outputs


EXAMPLES = {
    "add": Example(lambda a, b: a + b, [A, B], np.add, flops=N),
    "sub": Example(lambda a, b: a - b, [A, B], np.subtract, flops=N),
    "mul": Example(lambda a, b: a * b, [A, B], np.multiply, flops=N),
    "div": Example(lambda a, b: a / b, [A, POS], np.divide, flops=N),
    "pow": Example(lambda a, b: a ** b, [POS, B], np.power, flops=N),
    "maximum": Example(rt.maximum, [A, B], np.maximum, flops=N),
    "minimum": Example(rt.minimum, [A, B], np.minimum, flops=N),
    "floor_divide": Example(lambda a, b: a // b, [A, POS], np.floor_divide, grad=False, flops=N),
    "remainder": Example(lambda a, b: a % b, [A, POS], np.remainder, flops=N),
    "eq": Example(lambda a, b: a == b, [A, A[0]], np.equal, grad=False, flops=N),
    "ne": Example(lambda a, b: a != b, [A, A[0]], np.not_equal, grad=False, flops=N),
    "lt": Example(lambda a, b: a < b, [A, B], np.less, grad=False, flops=N),
    "le": Example(lambda a, b: a <= b, [A, B], np.less_equal, grad=False, flops=N),
    "gt": Example(lambda a, b: a > b, [A, B], np.greater, grad=False, flops=N),
    "ge": Example(lambda a, b: a >= b, [A, B], np.greater_equal, grad=False, flops=N),
    "logical_and": Example(lambda a, b: (a > 0) & (b > 0), [A, B], lambda a, b: (a > 0) & (b > 0), grad=False),
    "logical_or": Example(lambda a, b: (a > 0) | (b > 0), [A, B], lambda a, b: (a > 0) | (b > 0), grad=False),
    "logical_xor": Example(lambda a, b: (a > 0) ^ (b > 0), [A, B], lambda a, b: (a > 0) ^ (b > 0), grad=False),
    "logical_not": Example(lambda a: ~(a > 0), [A], lambda a: ~(a > 0), grad=False),
    "where": Example(lambda a, b: rt.where(a > 0, a, b), [A, B], lambda a, b: np.where(a > 0, a, b), flops=N),
    "clamp": Example(lambda a: a.clamp(-0.5, 0.5), [A], lambda a: np.clip(a, -0.5, 0.5), flops=N),
    # finite differences through float16 rounding are meaningless: see test_cast_gradient
    "cast": Example(lambda a: a.to(rt.float16).to(rt.float64), [A], lambda a: a.astype(np.float16).astype(np.float64),
                    grad=False, flops=0),
    "neg": Example(lambda a: -a, [A], np.negative, flops=N),
    "abs": Example(abs, [A], np.abs, flops=N),
    "sign": Example(rt.sign, [A], np.sign, grad=False, flops=N),
    "exp": Example(rt.exp, [A], np.exp, flops=N),
    "log": Example(rt.log, [POS], np.log, flops=N),
    "sqrt": Example(rt.sqrt, [POS], np.sqrt, flops=N),
    "rsqrt": Example(rt.rsqrt, [POS], lambda a: 1 / np.sqrt(a), flops=N),
    "reciprocal": Example(rt.reciprocal, [POS], np.reciprocal, flops=N),
    "sin": Example(rt.sin, [A], np.sin, flops=N),
    "cos": Example(rt.cos, [A], np.cos, flops=N),
    "tanh": Example(rt.tanh, [A], np.tanh, flops=N),
    "erf": Example(rt.erf, [A * 2], np.vectorize(math.erf), flops=N, rtol=1e-12),
    "floor": Example(rt.floor, [A], np.floor, grad=False, flops=N),
    "ceil": Example(rt.ceil, [A], np.ceil, grad=False, flops=N),
    "round": Example(rt.round, [A], np.round, grad=False, flops=N),
    "isnan": Example(rt.isnan, [A], np.isnan, grad=False),
    "isinf": Example(rt.isinf, [A], np.isinf, grad=False),
}


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example(name):
    run_example(name, EXAMPLES[name])


shapes = st.lists(st.integers(1, 4), min_size=0, max_size=3).map(tuple)


@settings(max_examples=40, deadline=None)
@given(shapes, shapes, st.sampled_from(["add", "sub", "mul", "maximum"]))
def test_broadcasting_matches_numpy(sa, sb, name):
    a, b = randn(*sa), randn(*sb, seed=2)
    try:
        expected = getattr(np, {"sub": "subtract", "mul": "multiply"}.get(name, name))(a, b)
    except ValueError:
        with pytest.raises(rt.ShapeError, match=name):
            getattr(rt, name)(rt.tensor(a), rt.tensor(b))
        return
    out = getattr(rt, name)(rt.tensor(a), rt.tensor(b))
    assert out.shape == expected.shape
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-6)
    costs = op_costs(lambda: getattr(rt, name)(rt.tensor(a), rt.tensor(b)))
    assert costs[name].flops == expected.size  # COUNTING.md: numel of the broadcast output


def test_broadcast_gradient_sums_back():
    a = rt.tensor(randn(2, 3), requires_grad=True)
    b = rt.tensor(randn(3), requires_grad=True)
    (a * b).sum().backward()
    np.testing.assert_allclose(b.grad.numpy(), a.numpy().sum(0), rtol=1e-6)
    np.testing.assert_allclose(a.grad.numpy(), np.broadcast_to(b.numpy(), (2, 3)), rtol=1e-6)


def test_scalars_keep_the_tensor_dtype():
    x = rt.ones(2, dtype=rt.float16)
    assert (x * 2.0).dtype is rt.float16
    assert (rt.ones(2, dtype=rt.int32) + 1).dtype is rt.int32
    assert (rt.ones(2, dtype=rt.int64) * 1.5).dtype is rt.float32
    assert (rt.ones(2, dtype=rt.int64) / 2).dtype is rt.float32
    assert (2 - rt.ones(2)).numpy().tolist() == [1.0, 1.0]


def test_mismatched_shapes_name_op_and_shapes():
    with pytest.raises(rt.ShapeError, match=r"add: shapes \(2, 3\) and \(4,\)"):
        rt.ones(2, 3) + rt.ones(4)


def test_mixed_devices_are_refused():
    with pytest.raises(rt.DeviceError, match="different devices"):
        rt.ones(2) + rt.ones(2, device="meta")


def test_erf_float32_accuracy():
    x = np.linspace(-6, 6, 2001)
    ref = np.vectorize(math.erf)(x)
    got = rt.erf(rt.tensor(x.astype(np.float32))).numpy()
    assert np.max(np.abs(got - ref)) < 3e-7


def test_inplace_operator_rebinds_and_keeps_graph():
    x = rt.tensor([1.0, 2.0], requires_grad=True)
    y = x * 1.0
    y += x  # a new tensor bound to y; the graph through the old y stays valid
    y.sum().backward()
    assert x.grad.tolist() == [2.0, 2.0]


def test_cast_gradient_is_identity_in_the_input_dtype():
    x = rt.tensor(A, requires_grad=True)  # float64
    y = x.to(rt.float32)
    (y * rt.tensor(B.astype(np.float32))).sum().backward()
    assert x.grad.dtype is rt.float64
    np.testing.assert_allclose(x.grad.numpy(), np.broadcast_to(B, A.shape), rtol=1e-6)


@pytest.mark.parametrize("exponent", [2.0, 3.0])
def test_pow_by_small_integer_multiplies_and_keeps_its_gradient(exponent):
    # x ** 3 (tanh-GELU) and x ** 2 are computed by multiplication: within float32 rounding of
    # the exact power, negative bases included, and the gradient is still b·x^(b-1)
    x = rt.tensor(randn(4, 5).astype(np.float32), requires_grad=True)
    b = rt.tensor(np.array(exponent, np.float32))
    y = x ** b
    exact = x.numpy().astype(np.float64) ** exponent
    np.testing.assert_allclose(y.numpy(), exact, rtol=3e-7, atol=1e-7)
    assert y.dtype == rt.float32
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), exponent * x.numpy().astype(np.float64) ** (exponent - 1), rtol=1e-6)


def test_sigmoid_family_is_exact_at_the_extremes_and_on_random_signs():
    # the branch-free select must give what numpy's where gives, NaN and infinities included
    x = np.concatenate([randn(1000), [np.inf, -np.inf, np.nan, 0.0, -0.0, 88.0, -104.0]]).astype(np.float32)
    e = np.exp(-np.abs(x.astype(np.float64)))
    expected = np.where(x >= 0, 1 / (1 + e), e / (1 + e))
    np.testing.assert_allclose(rt.sigmoid(rt.tensor(x)).numpy(), expected, rtol=2e-7, atol=1.5e-45)
    leaky = rt.nn.functional.leaky_relu(rt.tensor(x), 0.1).numpy()
    np.testing.assert_array_equal(leaky, np.where(x > 0, x, x * np.float32(0.1)))


def test_relu_over_many_blocks_keeps_nan_and_infinities_as_maximum_does():
    x = randn(40_000).astype(np.float32)  # more than one block of the cached zeros
    x[::997] = np.nan
    x[1::1009], x[2::1013] = np.inf, -np.inf
    np.testing.assert_array_equal(rt.relu(rt.tensor(x)).numpy(), np.maximum(x, 0))
