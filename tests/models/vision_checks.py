"""Checks shared by the image-classifier zoo tests: counts, meta forward, MACs, init statistics."""

from __future__ import annotations

import math

import numpy as np
import pytest
from opcheck import record
from torchvision_ref import STATE_DICT_SIGNATURES, assert_matches_torchvision, signature_of, torchvision_model

import flopcount.runtime as rt
from flopcount import models


def meta_model(name: str, **config):
    """Zoo model ``name`` built on the meta device (shapes only: cheap for any size)."""
    with rt.meta():
        return models.get(name, **config)


def parameter_count(model) -> int:
    return sum(math.prod(p.shape) for p in model.parameters())


def meta_forward(model, name: str):
    """(output, dispatched OpEvents) of an eval-mode forward on the meta default input."""
    model.eval()
    return record(lambda: model(models.example_input(name, device="meta")))


def conv_linear_macs(events) -> int:
    """MACs of the conv and linear ops among ``events`` (what torchvision's "_ops" figure counts)."""
    return sum(e.cost.macs for e in events if e.op.name in ("conv", "linear"))


def eager_forward(name: str):
    """(model, output) of zoo ``name`` built eagerly, run in eval mode on its default input."""
    model = models.get(name).eval()
    with rt.no_grad():
        out = model(models.example_input(name))
    return model, out


def values(t, limit: int = 1 << 20) -> np.ndarray:
    """The tensor's values as float64, flat; an evenly strided sample of ``limit`` for big ones."""
    flat = t.numpy().reshape(-1)
    return np.asarray(flat[:: max(1, flat.size // limit)], dtype=np.float64)


def assert_normal_std(t, std: float, rel: float = 0.05) -> None:
    """Zero-mean values whose spread is ``std`` (within ``rel``; samples are thousands or more)."""
    v = values(t)
    assert abs(v.mean()) < 4 * std / math.sqrt(v.size) + 1e-12, (v.mean(), std)
    assert abs(v.std() / std - 1) < rel, (v.std(), std)


def assert_uniform_bound(t, bound: float) -> None:
    """Values of U(-bound, bound): inside the bound, and the uniform's spread bound/sqrt(3)."""
    v = values(t)
    assert np.abs(v).max() <= bound * (1 + 1e-6)
    assert abs(v.std() / (bound / math.sqrt(3)) - 1) < 0.1, (v.std(), bound)


def assert_constant(t, value: float) -> None:
    np.testing.assert_array_equal(values(t), value)


def fan_in(weight) -> int:
    return math.prod(weight.shape[1:])


def fan_out(weight) -> int:
    return weight.shape[0] * math.prod(weight.shape[2:])


class ClassifierTests:
    """The checks every torchvision-matching classifier gets; a test class per family subclasses
    it and sets the published figures (torchvision's model docs):

    * ``PUBLISHED_PARAMS``: name -> parameter count;
    * ``PUBLISHED_GMACS``: name -> conv + linear GMACs at the default input (torchvision's "GFLOPS"
      column, which counts one multiply-add as one op), three decimals.

    Tests run model by model (``name`` is class-scoped), so one eager instance is alive at a time.
    """

    PUBLISHED_PARAMS: dict = {}
    PUBLISHED_GMACS: dict = {}
    NUM_CLASSES = 1000
    INPUT_SIZE = 224

    def pytest_generate_tests(self, metafunc):
        if "name" in metafunc.fixturenames:
            metafunc.parametrize("name", list(self.PUBLISHED_PARAMS), scope="class")

    @pytest.fixture(scope="class")
    @classmethod
    def eager(cls, name):
        return eager_forward(name)

    def test_registry_entry(self, name):
        entry = models.info(name)
        assert entry.params == self.PUBLISHED_PARAMS[name]
        assert entry.inputs[0][1:3] == ((3, self.INPUT_SIZE, self.INPUT_SIZE), "float32")

    def test_parameter_count(self, name):
        assert parameter_count(meta_model(name)) == self.PUBLISHED_PARAMS[name]

    def test_state_dict_layout_is_torchvisions(self, name):
        assert signature_of(meta_model(name)) == STATE_DICT_SIGNATURES[name], \
            f"{name}: state-dict names/shapes differ from torchvision's (diff them with torchvision installed)"

    def test_meta_forward_shape_and_macs(self, name):
        out, events = meta_forward(meta_model(name), name)
        assert out.device.type == "meta"
        assert out.shape == (1, self.NUM_CLASSES) and out.dtype == rt.float32
        assert abs(conv_linear_macs(events) / 1e9 - self.PUBLISHED_GMACS[name]) < 5e-4

    def test_eager_forward_matches_meta(self, name, eager):
        _, out = eager
        meta_out, _ = meta_forward(meta_model(name), name)
        assert out.device.type == "cpu"
        assert (out.shape, out.dtype) == (meta_out.shape, meta_out.dtype)
        assert np.isfinite(out.numpy()).all()

    def test_matches_torchvision(self, name, eager):
        # defined last, so it runs last per model: it overwrites the shared instance's weights
        x = models.example_input(name).numpy()
        tv_model = torchvision_model(name, x.shape[1:])
        model, _ = eager
        assert_matches_torchvision(model, tv_model, x)
