"""histc against torch.histc's rule (written here with numpy), its data range, and 3 FLOPs per
element."""

import numpy as np
import pytest

import flopcount.runtime as rt
from flopcount.runtime.errors import ShapeError
from flopcount.runtime.ops.histogram import histc
from opcheck import Example, run_example

# no value on a bin edge: the reference and the kernel agree whatever the rounding
VALUES = np.array([[0.1, 0.9, 1.3, 2.6], [3.9, -0.5, 4.0, 1.1]])


def _reference(x, bins=4, low=0.0, high=4.0):
    flat = x.reshape(-1)
    flat = flat[(flat >= low) & (flat <= high)]
    position = np.minimum(((flat - low) * bins / (high - low)).astype(int), bins - 1)
    return np.bincount(position, minlength=bins).astype(x.dtype)


EXAMPLES = {
    "histc": Example(lambda x: histc(x, 4, 0.0, 4.0), [VALUES], _reference, grad=False, flops=3 * 8),
}


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example(name):
    run_example(name, EXAMPLES[name])


def test_the_top_edge_goes_to_the_last_bin_and_values_outside_nowhere():
    counts = histc(rt.tensor([0.0, 4.0, 4.5, -1.0, 2.0]), 4, 0.0, 4.0)
    assert counts.tolist() == [1.0, 0.0, 1.0, 1.0]


def test_no_range_takes_the_data_range():
    assert histc(rt.tensor([1.0, 3.0, 2.9]), 2).tolist() == [1.0, 2.0]
    assert histc(rt.tensor([2.0, 2.0]), 2).tolist() == [0.0, 2.0]   # one value: widened to [1, 3]


def test_integers_are_counted_in_their_dtype_and_booleans_refused():
    # as CUDA's histc (an MoE router counts its experts' ids this way on the GPU)
    counts = histc(rt.tensor(np.array([0, 3, 3, 1], dtype=np.int32)), 4, 0, 3)
    assert counts.dtype.name == "int32" and counts.tolist() == [1, 1, 0, 2]
    with pytest.raises(ShapeError, match=r"histc: expects a numeric tensor, got bool"):
        histc(rt.tensor([True, False]), 2, 0, 2)
