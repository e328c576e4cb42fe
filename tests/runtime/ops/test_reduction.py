"""Reductions: values, gradients, meta shapes, and cost (numel(in), + numel(out) for mean)."""

import numpy as np
import pytest

import flopcount.runtime as rt
from opcheck import Example, check_op, randn, run_example

X = randn(3, 4, 5)
TIES = np.array([[1.0, 3.0, 3.0], [2.0, 0.0, -1.0]])

EXAMPLES = {
    "sum": Example(lambda x: x.sum((0, 2)), [X], lambda x: x.sum((0, 2)), flops=60),
    "mean": Example(lambda x: x.mean(1, keepdim=True), [X], lambda x: x.mean(1, keepdims=True), flops=60 + 15),
    "amax": Example(lambda x: x.amax(-1), [X], lambda x: x.max(-1), flops=60),
    "amin": Example(lambda x: x.amin(0), [X], lambda x: x.min(0), flops=60),
    "argmax": Example(lambda x: x.argmax(1), [X], lambda x: x.argmax(1), grad=False, flops=60),
    "argmin": Example(lambda x: x.argmin(), [X], lambda x: x.argmin(), grad=False, flops=60),
    "prod": Example(lambda x: x.prod(2), [X], lambda x: x.prod(2), flops=60),
    "all": Example(lambda x: (x > -3).all(1), [X], lambda x: (x > -3).all(1), grad=False),
    "any": Example(lambda x: (x > 1).any(), [X], lambda x: (x > 1).any(), grad=False),
    "cumsum": Example(lambda x: x.cumsum(1), [X], lambda x: x.cumsum(1), flops=60),
}


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example(name):
    run_example(name, EXAMPLES[name])


@pytest.mark.parametrize("dim,keepdim", [(None, False), (0, True), ((1, 2), False), (-1, False)])
def test_composites(dim, keepdim):
    check_op(lambda x: x.var(dim, keepdim=keepdim), [X], lambda x: x.var(dim, ddof=1, keepdims=keepdim))
    check_op(lambda x: x.std(dim, unbiased=False, keepdim=keepdim), [X], lambda x: x.std(dim, keepdims=keepdim))
    if dim is not None:
        ref = lambda x: np.log(np.exp(x).sum(dim, keepdims=keepdim))  # noqa: E731
        check_op(lambda x: x.logsumexp(dim, keepdim), [X], ref)
    check_op(lambda x: x.norm(2, dim, keepdim), [X], lambda x: np.sqrt((x * x).sum(dim, keepdims=keepdim)))


def test_max_with_dim_returns_values_and_indices():
    values, indices = rt.max(rt.tensor(X), dim=1)
    np.testing.assert_allclose(values.numpy(), X.max(1), rtol=1e-6)
    np.testing.assert_array_equal(indices.numpy(), X.argmax(1))
    assert rt.max(rt.tensor(X)).shape == ()


def test_ties_share_the_gradient_evenly():
    x = rt.tensor(TIES, requires_grad=True)
    x.amax(1).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [[0, 0.5, 0.5], [1, 0, 0]])


def test_integer_sum_widens_to_int64():
    assert rt.ones(3, dtype=rt.int32).sum().dtype is rt.int64
    assert rt.ones(3, dtype=rt.int32).mean().dtype is rt.float32


def test_cumsum_accumulates_in_the_dtype_asked():
    big = np.array([2**30, 2**30, 2**30, 5], dtype=np.int32)   # overflows int32 at the second sum
    for device in ("cpu", "meta"):
        x = rt.tensor(big).to(device)
        assert x.cumsum(0).dtype is rt.int64 and x.cumsum(0, dtype=rt.int32).dtype is rt.int32
        assert rt.cumsum(x > 0, 0, dtype="float16").dtype is rt.float16
    np.testing.assert_array_equal(rt.tensor(big).cumsum(0, dtype="int32").numpy(), np.cumsum(big, dtype=np.int32))
    np.testing.assert_array_equal(rt.tensor(big).cumsum(0).numpy(), np.cumsum(big.astype(np.int64)))


def test_bad_dim_names_op():
    with pytest.raises(rt.ShapeError, match="sum: dim 3 is out of range"):
        rt.ones(2, 2).sum(3)
