"""Activations and softmax: values, gradients, meta and COUNTING.md costs."""

import numpy as np
import pytest

import flopcount.runtime as rt
from opcheck import Example, randn, run_example

X = randn(3, 7)
N = 21


def _softmax(x, axis=-1):
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


EXAMPLES = {
    "relu": Example(rt.relu, [X], lambda x: np.maximum(x, 0), flops=N),
    "sigmoid": Example(rt.sigmoid, [X * 5], lambda x: 1 / (1 + np.exp(-x)), flops=4 * N),
    "softmax": Example(lambda x: rt.softmax(x, 0), [X], lambda x: _softmax(x, 0), flops=5 * N),
    "log_softmax": Example(lambda x: rt.log_softmax(x, -1), [X], lambda x: np.log(_softmax(x)), flops=5 * N),
}


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example(name):
    run_example(name, EXAMPLES[name])


def test_sigmoid_does_not_overflow():
    out = rt.sigmoid(rt.tensor([-1000.0, 0.0, 1000.0])).numpy()
    np.testing.assert_allclose(out, [0.0, 0.5, 1.0])
