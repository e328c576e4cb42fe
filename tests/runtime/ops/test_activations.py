"""Activations and softmax: values, gradients, meta and COUNTING.md costs; torch on the same inputs."""

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import flopcount.runtime as rt
from opcheck import Example, check_op, op_costs, randn, run_example

F = rt.nn.functional
X = randn(3, 7) * 2  # spans both sides of every kink (0, ±1, ±3)
N = 21


def _softmax(x, axis=-1):
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _softplus(x):
    return np.log1p(np.exp(x))


_erf = np.vectorize(math.erf)

EXAMPLES = {
    "relu": Example(rt.relu, [X], lambda x: np.maximum(x, 0), flops=N),
    "sigmoid": Example(rt.sigmoid, [X * 5], _sigmoid, flops=4 * N),
    "softmax": Example(lambda x: rt.softmax(x, 0), [X], lambda x: _softmax(x, 0), flops=5 * N),
    "log_softmax": Example(lambda x: rt.log_softmax(x, -1), [X], lambda x: np.log(_softmax(x)), flops=5 * N),
    "hardtanh": Example(lambda x: F.hardtanh(x, -1.0, 2.0), [X], lambda x: np.clip(x, -1, 2), flops=N),
    "leaky_relu": Example(lambda x: F.leaky_relu(x, 0.1), [X], lambda x: np.where(x > 0, x, 0.1 * x), flops=N),
    # one slope per channel (dim 1 of a (3, 7) input)
    "prelu": Example(F.prelu, [X, np.linspace(-0.5, 0.5, 7)], lambda x, w: np.where(x > 0, x, w * x), flops=N),
    # alpha·(exp(x) − 1) on the negative side: exp, subtract, multiply, select
    "elu": Example(lambda x: F.elu(x, 0.7), [X], lambda x: np.where(x > 0, x, 0.7 * np.expm1(x)), flops=4 * N),
    "gelu": Example(F.gelu, [X], lambda x: 0.5 * x * (1 + _erf(x / math.sqrt(2))), flops=5 * N),
    "silu": Example(F.silu, [X], lambda x: x * _sigmoid(x), flops=5 * N),
    "hardsigmoid": Example(F.hardsigmoid, [X * 2], lambda x: np.clip(x / 6 + 0.5, 0, 1), flops=3 * N),
    "hardswish": Example(F.hardswish, [X * 2], lambda x: x * np.clip(x + 3, 0, 6) / 6, flops=4 * N),
    # beta != 1 adds the scaling in and out: 4 + 2 per element; threshold 1 keeps both branches
    "softplus": Example(lambda x: F.softplus(x, 2.0, 1.0), [X],
                        lambda x: np.where(2 * x > 1, x, _softplus(2 * x) / 2), flops=6 * N),
    "mish": Example(F.mish, [X], lambda x: x * np.tanh(_softplus(x)), flops=5 * N),
}


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example(name):
    run_example(name, EXAMPLES[name])


def test_sigmoid_does_not_overflow():
    out = rt.sigmoid(rt.tensor([-1000.0, 0.0, 1000.0])).numpy()
    np.testing.assert_allclose(out, [0.0, 0.5, 1.0])


def test_softplus_mish_logsigmoid_are_finite_far_out():
    x = rt.tensor([-1000.0, 1000.0])
    np.testing.assert_allclose(F.softplus(x).numpy(), [0.0, 1000.0])
    np.testing.assert_allclose(F.mish(x).numpy(), [0.0, 1000.0])
    np.testing.assert_allclose(F.logsigmoid(x).numpy(), [-1000.0, 0.0])


def test_gelu_tanh_form_counts_eight_flops_per_element():
    ref = lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))  # noqa: E731
    check_op(lambda x: F.gelu(x, approximate="tanh"), [X], ref)
    assert op_costs(lambda: F.gelu(rt.tensor(X), approximate="tanh"))["gelu"].flops == 8 * N


@pytest.mark.parametrize("name,kwargs,flops", [("elu", {"alpha": 1.0}, 4), ("selu", {}, 5), ("celu", {"alpha": 0.5}, 5)])
def test_elu_family_counts_its_scales(name, kwargs, flops):
    # SELU multiplies by its scale, CELU divides the input by alpha: one more FLOP each
    assert op_costs(lambda: getattr(F, name)(rt.tensor(X), **kwargs))["elu"].flops == flops * N


COMPOSITES = {
    "relu6": (F.relu6, lambda x: np.clip(x, 0, 6), X * 3),
    "selu": (F.selu, lambda x: 1.0507009873554805 * np.where(x > 0, x, 1.6732632423543772 * np.expm1(x)), X),
    "celu": (lambda x: F.celu(x, 0.5), lambda x: np.where(x > 0, x, 0.5 * np.expm1(x / 0.5)), X),
    "logsigmoid": (F.logsigmoid, lambda x: np.log(_sigmoid(x)), X),
    "softsign": (F.softsign, lambda x: x / (1 + np.abs(x)), X),
    "tanhshrink": (F.tanhshrink, lambda x: x - np.tanh(x), X),
    "glu": (lambda x: F.glu(x, 0), lambda x: x[:2] * _sigmoid(x[2:]), randn(4, 3)),
    "softmin": (lambda x: F.softmin(x, 1), lambda x: _softmax(-x, 1), X),
}


@pytest.mark.parametrize("name", sorted(COMPOSITES))
def test_composites(name):
    fn, ref, x = COMPOSITES[name]
    check_op(fn, [x], ref)


def test_softmax_implicit_dim_follows_pytorch():
    x = randn(2, 3, 4)
    np.testing.assert_allclose(F.softmax(rt.tensor(x)).numpy(), _softmax(x, 0), rtol=1e-6)  # 3-d: dim 0
    np.testing.assert_allclose(F.softmax(rt.tensor(x[0])).numpy(), _softmax(x[0], 1), rtol=1e-6)  # 2-d: dim 1


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=2, max_size=4).map(tuple), st.sampled_from([True, False]))
def test_prelu_shared_or_per_channel_slopes(shape, shared):
    x = randn(*shape)
    w = np.array([0.3]) if shared else np.linspace(0.1, 0.9, shape[1])
    view = w if shared else w.reshape((1, -1) + (1,) * (len(shape) - 2))
    check_op(F.prelu, [x, w], lambda x, w: np.where(x > 0, x, view * x))


def test_bad_inputs_name_the_op():
    with pytest.raises(rt.ShapeError, match=r"prelu: weight \(3,\) needs 1 element or one per channel"):
        F.prelu(rt.ones(2, 4), rt.ones(3))
    with pytest.raises(rt.ShapeError, match="gelu: approximate must be 'none' or 'tanh'"):
        F.gelu(rt.ones(2), approximate="fast")
    with pytest.raises(rt.ShapeError, match="silu: expects a floating point tensor"):
        F.silu(rt.ones(2, dtype=rt.int64))
    with pytest.raises(rt.ShapeError, match=r"glu: dim 0 of the input \(3, 2\) must have an even size"):
        F.glu(rt.ones(3, 2), 0)


# --- against torch, float32 ----------------------------------------------------------------------

TORCH_CASES = [
    ("relu", {}), ("relu6", {}), ("leaky_relu", {"negative_slope": 0.2}), ("elu", {"alpha": 0.7}),
    ("selu", {}), ("celu", {"alpha": 1.3}), ("gelu", {}), ("gelu", {"approximate": "tanh"}), ("silu", {}),
    ("mish", {}), ("hardswish", {}), ("hardsigmoid", {}), ("hardtanh", {"min_val": -0.5, "max_val": 2.0}),
    ("softplus", {"beta": 2.0, "threshold": 3.0}), ("logsigmoid", {}), ("softsign", {}), ("tanhshrink", {}),
    ("sigmoid", {}), ("tanh", {}), ("softmax", {"dim": 1}), ("softmin", {"dim": 0}), ("log_softmax", {"dim": 1}),
    ("glu", {"dim": 1}),
]


@pytest.mark.parametrize("name,kwargs", TORCH_CASES, ids=[f"{n}-{k}" for n, k in TORCH_CASES])
def test_matches_torch(name, kwargs):
    torch = pytest.importorskip("torch")
    x = (randn(4, 6, seed=3) * 3).astype(np.float32)
    g = randn(4, 6 if name != "glu" else 3, seed=4).astype(np.float32)
    xa = rt.tensor(x, requires_grad=True)
    xt = torch.tensor(x, requires_grad=True)
    ya = getattr(F, name)(xa, **kwargs)
    yt = getattr(torch.nn.functional, name)(xt, **kwargs)
    (ya * rt.tensor(g)).sum().backward()
    (yt * torch.tensor(g)).sum().backward()
    np.testing.assert_allclose(ya.numpy(), yt.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(xa.grad.numpy(), xt.grad.numpy(), rtol=1e-5, atol=1e-5)


def test_prelu_matches_torch():
    torch = pytest.importorskip("torch")
    x = randn(2, 3, 4, seed=5).astype(np.float32)
    w = np.array([0.1, -0.2, 0.3], dtype=np.float32)
    xa, wa = rt.tensor(x, requires_grad=True), rt.tensor(w, requires_grad=True)
    xt, wt = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    F.prelu(xa, wa).sum().backward()
    torch.nn.functional.prelu(xt, wt).sum().backward()
    np.testing.assert_allclose(xa.grad.numpy(), xt.grad.numpy(), rtol=1e-5)
    np.testing.assert_allclose(wa.grad.numpy(), wt.grad.numpy(), rtol=1e-5)
