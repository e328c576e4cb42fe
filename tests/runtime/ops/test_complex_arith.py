"""complex_mul: the product of complex numbers in the real layout (..., 2) against numpy's
complex arithmetic, its gradient by finite differences, and 6 FLOPs per complex element."""

import numpy as np
import pytest

import flopcount.runtime as rt
from flopcount.runtime.errors import ShapeError
from flopcount.runtime.ops.complex_arith import complex_mul
from opcheck import Example, check_op, randn, run_example

A = randn(3, 4, 2)
B = randn(4, 2, seed=1)   # broadcast over the leading dim of A


def _as_complex(x):
    return x[..., 0] + 1j * x[..., 1]


def _as_real(z):
    return np.stack([z.real, z.imag], axis=-1)


def _product(a, b, conjugate=False):
    zb = _as_complex(b)
    return _as_real(_as_complex(a) * (np.conj(zb) if conjugate else zb))


EXAMPLES = {
    # 12 complex products, 4 real multiplies and 2 adds each
    "complex_mul": Example(complex_mul, [A, B], _product, flops=6 * 12),
}


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example(name):
    run_example(name, EXAMPLES[name])


def test_the_conjugate_product_and_its_gradient():
    check_op(lambda a, b: complex_mul(a, b, conjugate=True), [A, B], lambda a, b: _product(a, b, True))


def test_a_tensor_without_the_real_layout_is_refused():
    with pytest.raises(ShapeError, match=r"complex_mul: b \(4, 3\) is not a complex tensor in the real layout"):
        complex_mul(rt.tensor(A.astype(np.float32)), rt.zeros(4, 3))
