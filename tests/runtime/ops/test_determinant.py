"""det (and the inverse its gradient uses) against numpy.linalg; gradients by finite
differences; an LU's n³/3 MACs per matrix."""

import numpy as np
import pytest

from flopcount.runtime.dispatch import apply
from flopcount.runtime.ops.determinant import _Inverse, det
from opcheck import Example, randn, run_example

# well conditioned: the identity plus a small random part
MATRICES = np.eye(3) + 0.3 * randn(2, 3, 3)

EXAMPLES = {
    "det": Example(det, [MATRICES], np.linalg.det, macs=2 * 9, flops=2 * (2 * 9 + 3)),
    "inverse": Example(lambda x: apply(_Inverse, x), [MATRICES], np.linalg.inv, macs=2 * 27),
}


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example(name):
    run_example(name, EXAMPLES[name])
