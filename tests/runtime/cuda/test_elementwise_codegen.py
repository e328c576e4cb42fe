"""The generated elementwise code: each op's expression, evaluated as the kernel would (numpy
running the generated statements), equals the op's CPU kernel; random chains equal the CPU
fused_elementwise kernel; every function the expressions call has a CUDA definition."""

import math
import re

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import flopcount.runtime as rt
from flopcount.runtime.cuda.kernels import elementwise as ew
from flopcount.runtime.graph.fused import FusedElementwise

X = np.random.default_rng(0).standard_normal((4, 33)) * 4  # both sides of every kink

ATTRS = {
    "clamp": [{"min": -1.0, "max": 2.0}, {"min": None, "max": 0.5}, {"min": -0.5, "max": None}],
    "hardtanh": [{"min_val": 0.0, "max_val": 6.0}],
    "leaky_relu": [{"negative_slope": 0.2}],
    "gelu": [{"approximate": "none"}, {"approximate": "tanh"}],
    "softplus": [{"beta": 1.0, "threshold": 20.0}, {"beta": 2.0, "threshold": 1.0}, {"beta": 1.0, "threshold": math.inf}],
    "elu": [{"alpha": 0.7, "scale": 1.0, "input_scale": 1.0}, {"alpha": 1.67, "scale": 1.05, "input_scale": 0.5}],
}
BINARY = {"add", "sub", "mul", "div", "pow", "maximum", "minimum"}
UNARY = sorted(set(ew.EXPRESSIONS) - BINARY)


def _inputs(name):
    if name in ("log", "sqrt", "rsqrt"):
        return [np.abs(X) + 0.1]
    if name == "pow":
        return [np.abs(X) + 0.1, X[:, :1] / 4]  # broadcast exponent
    if name in BINARY:
        return [X, X[::-1] + 0.5]
    return [X]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", sorted(ew.EXPRESSIONS))
def test_expression_equals_the_op_kernel(name, dtype):
    op = rt.get_op(name)
    for attrs in ATTRS.get(name, [{}]):
        arrays = [a.astype(dtype) for a in _inputs(name)]
        args = tuple(range(len(arrays)))
        got = ew.evaluate(arrays, ((name, args, attrs),))
        with np.errstate(all="ignore"):
            want = op.forward(np, *arrays, **attrs)
        assert got.dtype == dtype
        np.testing.assert_allclose(got, want, rtol=1e-6 if dtype == np.float32 else 1e-12, atol=1e-6,
                                   err_msg=f"{name} {attrs}")


def test_nan_propagates_like_numpy():
    x = np.array([np.nan, -1.0, 2.0])
    for name in ("relu", "maximum", "minimum", "clamp"):
        attrs = ATTRS.get(name, [{}])[0]
        arrays = [x, np.zeros(3)] if name in BINARY else [x]
        got = ew.evaluate(arrays, ((name, tuple(range(len(arrays))), attrs),))
        assert np.isnan(got[0]), name


@st.composite
def chains(draw):
    """A random chain over two inputs, as the fuse pass builds them (any step may read the
    inputs or any earlier result)."""
    steps = []
    for k in range(draw(st.integers(1, 6))):
        choices = list(range(2)) + [-1 - j for j in range(k)]
        if draw(st.booleans()):
            name = draw(st.sampled_from(["add", "sub", "mul", "maximum", "minimum"]))
            args = (draw(st.sampled_from(choices)), draw(st.sampled_from(choices)))
        else:
            name = draw(st.sampled_from(["relu", "tanh", "sigmoid", "silu", "gelu", "neg", "abs", "hardswish",
                                         "mish", "leaky_relu", "clamp"]))
            args = (draw(st.sampled_from(choices)),)
        steps.append((name, args, ATTRS.get(name, [{}])[0]))
    return tuple(steps)


@settings(max_examples=60, deadline=None)
@given(chains())
def test_random_chains_equal_the_cpu_fused_kernel(steps):
    a = np.random.default_rng(1).standard_normal((3, 5)).astype(np.float32)
    b = np.random.default_rng(2).standard_normal((1, 5)).astype(np.float32)  # broadcasts
    got = ew.run_chain(np, [a, b], steps)
    want = FusedElementwise.forward(np, a, b, steps=steps)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_float16_chains_compute_in_float32():
    x = (np.arange(-40, 40) / 8).astype(np.float16)
    got = ew.run_chain(np, [x], (("gelu", (0,), {"approximate": "none"}),))
    want = rt.get_op("gelu").forward(np, x.astype(np.float64), approximate="none")
    assert got.dtype == np.float16
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=1e-3, atol=1e-3)


def test_unknown_ops_and_mixed_dtypes_are_not_generated():
    x = np.ones(3, np.float32)
    assert ew.run_chain(np, [x], (("floor", (0,), {}),)) is None
    assert ew.run_chain(np, [x, x.astype(np.float64)], (("add", (0, 1), {}),)) is None
    assert ew.run_chain(np, [x.astype(np.int64)], (("relu", (0,), {}),)) is None


def test_kernel_body_and_preamble_agree():
    steps = (("mul", (0, 1), {}), ("gelu", (-1,), {"approximate": "tanh"}), ("clamp", (-2,), {"min": 0.0, "max": math.inf}))
    body = ew.kernel_body(steps, 2, np.float16)
    lines = body.splitlines()
    assert lines[0] == "typedef float acc_t;"  # halves accumulate in float
    assert lines[1:3] == ["acc_t v0 = acc_t(x0);", "acc_t v1 = acc_t(x1);"]
    assert lines[3] == "acc_t r0 = (v0 * v1);"
    assert lines[-1] == "out = T(r2);"
    assert "acc_t(INFINITY)" in lines[-2]
    assert ew.kernel_body(steps, 2, np.float64).startswith("typedef double acc_t;")
    called = set(re.findall(r"([a-z0-9_]+)\(", body)) - {"acc_t", "T", "sel"}
    preamble = ew.preamble()
    for fn in called:
        assert f"float {fn}(" in preamble and f"double {fn}(" in preamble, fn


def test_constants_are_spelled_for_both_languages():
    assert ew.const(0.5) == "acc_t(0.5)"
    assert ew.const(-math.inf) == "acc_t(-INFINITY)"
    assert ew.const(2) == "acc_t(2.0)"
