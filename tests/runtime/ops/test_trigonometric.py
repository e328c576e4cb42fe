"""tan, the inverse and the hyperbolic functions: values against numpy, gradients against
finite differences, 1 FLOP per element."""

import numpy as np
import pytest

from flopcount.runtime.ops import trigonometric as trig
from opcheck import Example, randn, run_example

UNIT = np.tanh(randn(3, 4))          # inside (-1, 1): asin, acos, atanh
ABOVE_ONE = 1.5 + np.abs(randn(3, 4))  # acosh
X = 0.5 * randn(3, 4)

EXAMPLES = {
    "tan": Example(trig.tan, [X], np.tan, flops=12),
    "asin": Example(trig.asin, [UNIT * 0.9], np.arcsin, flops=12),
    "acos": Example(trig.acos, [UNIT * 0.9], np.arccos, flops=12),
    "atan": Example(trig.atan, [randn(3, 4)], np.arctan, flops=12),
    "sinh": Example(trig.sinh, [X], np.sinh, flops=12),
    "cosh": Example(trig.cosh, [X], np.cosh, flops=12),
    "asinh": Example(trig.asinh, [randn(3, 4)], np.arcsinh, flops=12),
    "acosh": Example(trig.acosh, [ABOVE_ONE], np.arccosh, flops=12),
    "atanh": Example(trig.atanh, [UNIT * 0.9], np.arctanh, flops=12),
}


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example(name):
    run_example(name, EXAMPLES[name])
