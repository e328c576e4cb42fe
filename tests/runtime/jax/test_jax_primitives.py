"""Primitives beyond the model tests': an embedding lookup (gather), transposed convolutions
(``lhs_dilation``) with every padding Flax and ``lax`` write, views and scans of data (split,
rev, cumsum, dynamic_slice, pad, select_n, iota), and a case a converter does not take left in
the graph as an unsupported op with the reason in the notes. Each output is checked against
JAX's on the same arrays."""

from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax")
pytest.importorskip("flax")

import jax.numpy as jnp  # noqa: E402
from flax import linen as nn  # noqa: E402
from flax import nnx  # noqa: E402
from jax import lax  # noqa: E402

import flopcount  # noqa: E402
import flopcount.runtime as rt  # noqa: E402


def _normal(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _same_as_jax(graph, fn, *args):
    out = rt.GraphModule(graph)(*[rt.tensor(np.asarray(a)) for a in args])
    outs = out if isinstance(out, tuple) else (out,)
    refs = fn(*args)
    refs = refs if isinstance(refs, (tuple, list)) else (refs,)
    for got, want in zip(outs, refs):
        np.testing.assert_allclose(got.numpy(), np.asarray(want), rtol=1e-4, atol=1e-5)


def test_embedding_lookup_is_an_embedding_op():
    class Tagger(nnx.Module):
        def __init__(self, rngs):
            self.embed = nnx.Embed(50, 8, rngs=rngs)
            self.head = nnx.Linear(8, 3, rngs=rngs)

        def __call__(self, ids):
            return self.head(self.embed(ids))

    model, ids = Tagger(nnx.Rngs(0)), np.array([[1, 2, 3], [4, 5, 49]], np.int32)
    graph = rt.jax.to_graph(model, ids)
    assert "embedding" in {n.op_name for n in graph.nodes}
    assert graph.cost().macs == 2 * 3 * 8 * 3        # the lookup multiplies nothing
    _same_as_jax(graph, model, ids)
    assert flopcount.profile(model, ids).params == 50 * 8 + 8 * 3 + 3


@pytest.mark.parametrize("strides, padding", [((2, 2), "SAME"), ((2, 2), "VALID"), ((3, 2), ((1, 2), (0, 1)))])
def test_flax_conv_transpose_is_a_transposed_conv(strides, padding):
    model, x = nn.ConvTranspose(4, (3, 3), strides=strides, padding=padding), _normal(1, 5, 5, 2)
    variables = model.init(jax.random.key(0), x)
    graph = rt.jax.to_graph((model, variables), x)
    assert "conv_transpose" in {n.op_name for n in graph.nodes}
    assert graph.cost().macs == 5 * 5 * 2 * 4 * 3 * 3     # every input times every kernel tap, no zeros
    _same_as_jax(graph, lambda x: model.apply(variables, x), x)


@pytest.mark.parametrize("pad", [(3, 0), (0, 4), (5, 2)])
def test_lhs_dilated_conv_padding_beyond_the_kernel(pad):
    def f(x, w):
        return lax.conv_general_dilated(x, w, (1,), (pad,), lhs_dilation=(2,), dimension_numbers=("NWC", "WIO", "NWC"))

    x, w = _normal(1, 6, 3), _normal(4, 3, 2, seed=1)
    _same_as_jax(rt.jax.to_graph(f, x, w), f, x, w)


def test_views_scans_and_selections_run_as_jax_does():
    def f(x, i):
        a, b = jnp.split(x, 2, axis=1)
        window = lax.dynamic_slice(x, (1, 0), (2, 3))               # start known at import time
        picked = jnp.where(a > 0, jnp.cumsum(a, axis=0), jnp.flip(b, 0))
        ramp = jnp.arange(4, dtype=jnp.float32) * i
        return picked, jnp.pad(window, ((0, 1), (2, 0)), constant_values=-1.0), x[:, 1:3] + ramp[:2]

    x = _normal(3, 4)
    graph = rt.jax.to_graph(f, x, np.float32(2.0))
    _same_as_jax(graph, f, x, np.float32(2.0))


def test_a_case_the_converter_does_not_take_stays_as_an_unsupported_op():
    def f(x, w):   # a strided convolution of a dilated input: no runtime op computes it
        return lax.conv_general_dilated(x, w, (2,), ((1, 1),), lhs_dilation=(2,),
                                        dimension_numbers=("NWC", "WIO", "NWC"))

    report = flopcount.profile(f, jax.ShapeDtypeStruct((1, 6, 3), jnp.float32),
                               jax.ShapeDtypeStruct((3, 3, 2), jnp.float32))
    assert [u.name for u in report.unsupported] == ["JAX conv_general_dilated"]
    assert any("lhs_dilation (2,) with window strides (2,)" in n for n in report.notes)


def test_activations_and_rounding_run_as_jax_does():
    def f(x):
        return (jax.nn.log_softmax(x) + jax.nn.silu(x) + jax.nn.softplus(x) + jax.nn.gelu(x, approximate=False)
                + jnp.std(x, axis=-1, keepdims=True) + jnp.round(x * 3) + lax.round(x * 2.5) + jnp.arctan(x))

    x = _normal(2, 3, 8)
    _same_as_jax(rt.jax.to_graph(f, x), f, x)


def test_same_padding_at_stride_two_pads_one_side():
    class Stem(nn.Module):       # a ResNet stem: SAME at stride 2 pads (2, 3) and (0, 1)
        @nn.compact
        def __call__(self, x):
            x = nn.BatchNorm(use_running_average=True)(nn.Conv(8, (7, 7), strides=2, padding="SAME")(x))
            return nn.max_pool(nn.relu(x), (3, 3), strides=(2, 2), padding="SAME")

    model, x = Stem(), _normal(2, 16, 16, 3)
    variables = model.init(jax.random.key(0), x)
    graph = rt.jax.to_graph((model, variables), x)
    assert graph.cost().macs == 2 * 8 * 8 * 8 * 7 * 7 * 3
    _same_as_jax(graph, lambda x: model.apply(variables, x), x)
    assert flopcount.profile((model, variables), x).params == 7 * 7 * 3 * 8 + 8 + 2 * 8   # batch stats are buffers
