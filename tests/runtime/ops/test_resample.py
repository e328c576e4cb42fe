"""resample: a weighted sum of taps along one dim, against the dense interpolation matrix."""

import numpy as np
import pytest

import flopcount.runtime as rt
from flopcount.runtime.ops.resample import resample
from opcheck import Example, randn, run_example

INDEX = np.array([[0, 1, 2], [1, 2, 3], [3, 3, 3]])
WEIGHT = np.array([[0.25, 0.5, 0.25], [-0.1, 0.6, 0.5], [1.0, 0.0, 0.0]])


def _dense(x):
    matrix = np.zeros((3, x.shape[1]))
    for o in range(3):
        for t in range(3):
            matrix[o, INDEX[o, t]] += WEIGHT[o, t]
    return np.einsum("os,asb->aob", matrix, x)


EXAMPLES = {
    # 2·3 - 1 FLOPs per output element: (2, 3, 5) outputs
    "resample": Example(lambda x: resample(x, rt.tensor(INDEX, device=x.device),
                                           rt.tensor(WEIGHT, dtype=x.dtype, device=x.device), 1),
                        [randn(2, 4, 5)], _dense, flops=5 * 30),
}


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example(name):
    run_example(name, EXAMPLES[name])


def test_taps_must_pair_up():
    with pytest.raises(rt.ShapeError, match="must both be"):
        resample(rt.ones(2, 4), rt.tensor(INDEX), rt.ones(3, 2), 1)
