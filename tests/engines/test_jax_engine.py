"""``engine="jax"``: a JAX model's jitted call timed by JAX as a whole, beside flopcount's counts;
refused for models that are not JAX's and with ``threads`` (XLA keeps its own pool)."""

from __future__ import annotations

import pytest

jax = pytest.importorskip("jax")
pytest.importorskip("flax")

import jax.numpy as jnp  # noqa: E402
from flax import nnx  # noqa: E402

import flopcount  # noqa: E402
import flopcount.runtime as rt  # noqa: E402
from flopcount.engines import jax_engine  # noqa: E402
from flopcount.runtime.errors import FlopcountError  # noqa: E402


class Net(nnx.Module):
    def __init__(self, rngs):
        self.linear = nnx.Linear(16, 8, rngs=rngs)

    def __call__(self, x):
        return jax.nn.relu(self.linear(x))


def test_the_whole_call_is_timed_and_the_counts_stay_flopcounts():
    model = Net(nnx.Rngs(0))
    x = jax.ShapeDtypeStruct((4, 16), jnp.float32)     # the engine makes the array it runs on
    report = flopcount.profile(model, x, engine="jax", warmup=0, repeat=2)
    assert report.engine == "jax"
    assert report.latency_min_ms > 0 and report.latency_ms >= report.latency_min_ms
    assert all(row.latency_ms is None for row in report.rows)
    assert jax_engine.NOTE in report.notes
    assert report.macs == flopcount.profile(model, x).macs == 4 * 16 * 8


def test_refused_for_other_models_and_with_threads():
    with pytest.raises(FlopcountError, match="engine 'jax' times a JAX model"):
        flopcount.profile(rt.nn.Linear(3, 2), rt.ones(1, 3), engine="jax")
    with pytest.raises(FlopcountError, match="XLA's own thread pool"):
        flopcount.profile(Net(nnx.Rngs(0)), jnp.ones((4, 16)), engine="jax", threads=1)
