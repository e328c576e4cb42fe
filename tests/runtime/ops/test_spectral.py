"""dft against numpy.fft: complex and real signals, one-sided spectra, inverses; 5·L·log2 L
FLOPs per transform."""

import numpy as np
import pytest

import flopcount.runtime as rt
from flopcount.runtime.ops.spectral import dft
from opcheck import Example, check_op, randn, run_example

SIGNAL = randn(3, 8, 2)  # three complex signals of 8 samples


def _pairs(z):
    return np.stack([z.real, z.imag], -1)


def _fft(x):
    return _pairs(np.fft.fft(x[..., 0] + 1j * x[..., 1], axis=1))


EXAMPLES = {
    # 3 transforms of length 8: 5·8·3 FLOPs each
    "dft": Example(lambda x: dft(x, 1, 8), [SIGNAL], _fft, grad=False, flops=3 * 5 * 8 * 3),
}


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example(name):
    run_example(name, EXAMPLES[name])


def test_real_one_sided_padded_and_inverse():
    real = randn(2, 6, 1)
    check_op(lambda x: dft(x, 1, 8, onesided=True), [real],
             lambda x: _pairs(np.fft.rfft(x[..., 0], n=8, axis=1)), grad=False)
    check_op(lambda x: dft(x, 1, 8, inverse=True), [SIGNAL],
             lambda x: _pairs(np.fft.ifft(x[..., 0] + 1j * x[..., 1], axis=1)), grad=False)
    half = _pairs(np.fft.rfft(randn(2, 8), axis=1))
    check_op(lambda x: dft(x, 1, 8, inverse=True, onesided=True), [half],
             lambda x: np.fft.irfft(x[..., 0] + 1j * x[..., 1], n=8, axis=1)[..., None], grad=False)


def test_the_pair_dim_must_be_last_and_small():
    with pytest.raises(rt.ShapeError, match="expects"):
        dft(rt.ones(4, 3), 0, 4)
