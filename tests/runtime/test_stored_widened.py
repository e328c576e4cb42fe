"""Dtypes a backend's arrays cannot hold (CuPy has no int4 or float8 arrays) are held widened
(``Backend.stored_as``): the tensor keeps its narrow dtype, every value is rounded to it, and
reading it back gives the narrow dtype. Checked here with the CPU backend made to hold them
widened, against the same work with numpy's own int4 and float8 arrays."""

import sys

import ml_dtypes
import numpy as np
import pytest

import flopcount.runtime as rt
from flopcount.runtime import dtypes as dt

WIDENED = {dt.int4: dt.int8, dt.uint4: dt.uint8, dt.float8_e4m3fn: dt.float32}


@pytest.fixture
def widened_cpu(monkeypatch):
    cpu = sys.modules["flopcount.runtime.device"]._BACKENDS["cpu"]
    monkeypatch.setattr(cpu, "stored_as", WIDENED)
    return cpu


def _int4_weights():
    return np.random.default_rng(0).integers(-8, 8, size=(6, 8)).astype(ml_dtypes.int4)


def test_a_narrow_tensor_is_held_in_its_wide_dtype_and_read_back_narrow(widened_cpu):
    q = _int4_weights()
    t = rt.tensor(q)
    assert t.dtype is rt.int4 and t.data.dtype == np.int8
    assert t.numpy().dtype == ml_dtypes.int4 and np.array_equal(t.numpy(), q)
    z = rt.zeros(3, 2, dtype=rt.float8_e4m3fn)
    assert z.dtype is rt.float8_e4m3fn and z.data.dtype == np.float32


def test_values_written_to_a_narrow_tensor_are_rounded_to_it():
    x = np.array([0.3, 1.1, 300.0, -7.77], np.float32)
    expected = rt.tensor(x).to(rt.float8_e4m3fn).numpy()   # ml_dtypes' own rounding
    cpu = sys.modules["flopcount.runtime.device"]._BACKENDS["cpu"]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(cpu, "stored_as", WIDENED)
        got = rt.tensor(x).to(rt.float8_e4m3fn)
        assert got.data.dtype == np.float32
        assert np.array_equal(got.numpy(), expected)
        assert np.array_equal(rt.tensor(x, dtype=rt.float8_e4m3fn).numpy(), expected)


def test_int4_weights_compute_the_same_when_held_widened():
    q, scale = _int4_weights(), np.random.default_rng(1).random((6, 2)).astype(np.float32) + 0.5
    x = np.random.default_rng(2).standard_normal((3, 8)).astype(np.float32)

    def run():
        return (rt.nn.functional.quantized_linear(rt.tensor(x), rt.tensor(q), rt.tensor(scale)).numpy(),
                rt.nn.functional.dequantize(rt.tensor(q), rt.tensor(scale), rt.float32).numpy())

    narrow = run()
    cpu = sys.modules["flopcount.runtime.device"]._BACKENDS["cpu"]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(cpu, "stored_as", WIDENED)
        wide = run()
    for a, b in zip(narrow, wide):
        np.testing.assert_array_equal(a, b)
