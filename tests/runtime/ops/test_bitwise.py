"""Bitwise ops and shifts: values against numpy, one FLOP per element, no gradient."""

import numpy as np
import pytest

import flopcount.runtime as rt
from flopcount.runtime.ops import bitwise
from opcheck import Example, run_example

A = np.array([[0b1100, 7, -3], [255, 0, 18]], dtype=np.int32)
B = np.array([0b1010, 3, 5], dtype=np.int32)
U = np.array([1, 2, 200], dtype=np.uint8)
S = np.array([1, 3, 2], dtype=np.uint8)

EXAMPLES = {
    "bitwise_and": Example(bitwise.bitwise_and, [A, B], np.bitwise_and, grad=False, flops=6),
    "bitwise_or": Example(bitwise.bitwise_or, [A, B], np.bitwise_or, grad=False, flops=6),
    "bitwise_xor": Example(bitwise.bitwise_xor, [A, B], np.bitwise_xor, grad=False, flops=6),
    "bitwise_not": Example(bitwise.bitwise_not, [A], np.invert, grad=False, flops=6),
    # (integer input: the checks turn float inputs into float64; a float16 result, which the
    # half-precision checks take as it is)
    "bitcast": Example(lambda x: bitwise.bitcast(x, "float16"), [np.array([15360, -16128], np.int16)],
                       lambda x: x.view(np.float16), grad=False, flops=0),
    "bitshift": Example(lambda a, b: bitwise.bitshift(a, b, "left"), [U, S], lambda a, b: np.left_shift(a, b),
                        grad=False, flops=3),
}


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example(name):
    run_example(name, EXAMPLES[name])


def test_shifts_drop_the_bits_shifted_out_and_keep_the_type():
    left = bitwise.bitshift(rt.tensor(U), rt.tensor(S), "left")
    right = bitwise.bitshift(rt.tensor(U), rt.tensor(S), "right")
    assert left.dtype is rt.uint8 and left.tolist() == [2, 16, 32]   # 200 << 2 = 800 keeps its low byte
    assert right.tolist() == [0, 0, 50]


def test_floats_are_refused_with_their_type():
    with pytest.raises(rt.ShapeError, match="bitwise_and: expects integer or bool tensors, got float32"):
        bitwise.bitwise_and(rt.ones(2), rt.ones(2))
