"""NaN and Inf in the inputs: counting reads shapes only, so the counts are those of finite
inputs; timed runs compute on the values given, as the model would, without warnings or errors."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import flopcount
import flopcount.runtime as rt
from test_determinism import counts

nn = rt.nn


def _net():
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.GELU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(8 * 8 * 8, 10), nn.LayerNorm(10), nn.LogSoftmax(-1))


def _with_specials(shape) -> rt.Tensor:
    values = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    flat = values.reshape(-1)
    flat[::7], flat[1::11], flat[2::13] = np.nan, np.inf, -np.inf
    return rt.tensor(values)


@pytest.mark.parametrize("mode", ["eager", "graph"])
def test_nan_and_inf_inputs_count_as_finite_ones_and_run(mode):
    net = _net()
    finite = rt.randn(2, 3, 16, 16)
    special = _with_specials((2, 3, 16, 16))
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # not even a RuntimeWarning from numpy
        report = flopcount.profile(net, special, mode=mode, latency=True, backward=True, repeat=1)
    assert report.latency_ms is not None and report.backward_latency_ms is not None
    assert counts(report) == counts(flopcount.profile(net, finite, mode=mode, backward=True))


def test_nan_weights_do_not_stop_a_profile():
    net = rt.nn.Sequential(rt.nn.Linear(4, 4), rt.nn.LayerNorm(4), rt.nn.Softmax(-1))
    net[0].weight.data[:] = np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        report = flopcount.profile(net, rt.randn(3, 4), latency=True, repeat=1)
    assert report.macs == 3 * 4 * 4
