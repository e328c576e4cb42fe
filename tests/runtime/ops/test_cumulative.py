"""cumprod: values against numpy, gradient by finite differences, one multiply per element."""

import numpy as np
import pytest

from flopcount.runtime.ops.cumulative import cumprod
from opcheck import Example, randn, run_example

EXAMPLES = {
    "cumprod": Example(lambda x: cumprod(x, 1), [1 + 0.3 * randn(3, 4)], lambda x: np.cumprod(x, 1), flops=12),
}


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example(name):
    run_example(name, EXAMPLES[name])
