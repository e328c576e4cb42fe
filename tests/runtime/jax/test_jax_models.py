"""Flax models through the JAX door: an MLP (nnx), a CNN (Linen: convs, max and average pools,
a dense layer), a transformer block (nnx attention, layer norms, MLP) and a stack of layers
scanned with ``nn.scan``. Each is checked against hand formulas, against the same architecture
in PyTorch through flopcount's PyTorch door (MLP, CNN), against JAX's own outputs (the
imported graph run on flopcount's runtime), against the parameter tree's sizes, and for scopes
that name the Flax modules."""

from __future__ import annotations

import math

import numpy as np
import pytest

jax = pytest.importorskip("jax")
pytest.importorskip("flax")

import jax.numpy as jnp  # noqa: E402
from flax import linen as nn  # noqa: E402
from flax import nnx  # noqa: E402

import flopcount  # noqa: E402
import flopcount.runtime as rt  # noqa: E402


def _normal(*shape, seed=0):
    return jnp.asarray(np.random.default_rng(seed).standard_normal(shape), jnp.float32)


def _tree_size(tree) -> int:
    return sum(int(np.size(leaf)) for leaf in jax.tree_util.tree_leaves(tree))


def _run(graph, *args):
    """The imported graph run on flopcount's runtime."""
    return rt.GraphModule(graph)(*[rt.tensor(np.asarray(a)) for a in args]).numpy()


def _rows(report) -> dict:
    return {row.name: row for row in report.rows}


# --- MLP (nnx) ----------------------------------------------------------------------------------

B, D_IN, D_HIDDEN, D_OUT = 4, 32, 16, 10


class MLP(nnx.Module):
    def __init__(self, rngs):
        self.linear1 = nnx.Linear(D_IN, D_HIDDEN, rngs=rngs)
        self.linear2 = nnx.Linear(D_HIDDEN, D_OUT, rngs=rngs)

    def __call__(self, x):
        return self.linear2(jax.nn.relu(self.linear1(x)))


@pytest.fixture(scope="module")
def mlp():
    model, x = MLP(nnx.Rngs(0)), _normal(B, D_IN)
    return model, x, flopcount.profile(model, x)


def test_mlp_counts_match_the_formula_and_pytorch(mlp):
    torch = pytest.importorskip("torch")
    model, x, report = mlp
    assert report.macs == B * (D_IN * D_HIDDEN + D_HIDDEN * D_OUT)
    reference = torch.nn.Sequential(torch.nn.Linear(D_IN, D_HIDDEN), torch.nn.ReLU(), torch.nn.Linear(D_HIDDEN, D_OUT))
    assert report.macs == flopcount.profile(reference, torch.randn(B, D_IN)).macs
    assert report.params == _tree_size(nnx.state(model, nnx.Param)) == sum(p.numel() for p in reference.parameters())


def test_mlp_scopes_and_parameters_are_the_module_tree(mlp):
    model, x, report = mlp
    rows = _rows(report)
    assert rows["linear1"].type == "Linear" and rows["linear2"].type == "Linear"
    assert rows["linear1"].macs == B * D_IN * D_HIDDEN
    graph = rt.jax.to_graph(model, x)
    assert sorted(graph.parameters) == ["linear1.bias", "linear1.kernel", "linear2.bias", "linear2.kernel"]
    np.testing.assert_allclose(_run(graph, x), np.asarray(model(x)), rtol=1e-4, atol=1e-5)


def test_xla_cost_analysis_is_a_note_beside_the_count(mlp):
    _, _, report = mlp
    (note,) = [n for n in report.notes if n.startswith("XLA cost_analysis")]
    xla = int(note.split()[2])
    assert xla > 0 and abs(xla - report.flops) <= 0.05 * report.flops  # XLA counts the same work its own way


# --- CNN (Linen) ---------------------------------------------------------------------------------

class CNN(nn.Module):
    @nn.compact
    def __call__(self, x):                       # NHWC, as Flax writes convolutions
        x = nn.relu(nn.Conv(8, (3, 3), padding="SAME")(x))
        x = nn.max_pool(x, (2, 2), strides=(2, 2))
        x = nn.Conv(16, (3, 3), strides=2, padding=1, feature_group_count=2)(x)
        x = nn.avg_pool(x, (2, 2), strides=(2, 2))
        return nn.Dense(10)(x.reshape((x.shape[0], -1)))


@pytest.fixture(scope="module")
def cnn():
    model, x = CNN(), _normal(2, 16, 16, 3)
    variables = model.init(jax.random.key(0), x)
    return model, variables, x, flopcount.profile((model, variables), x)


def test_cnn_counts_match_the_formula_and_pytorch(cnn):
    torch = pytest.importorskip("torch")
    _, variables, _, report = cnn
    conv1 = 2 * 16 * 16 * 8 * (3 * 3 * 3)
    conv2 = 2 * 4 * 4 * 16 * (3 * 3 * 8 // 2)     # two groups: each output sees half the channels
    dense = 2 * (2 * 2 * 16) * 10
    assert report.macs == conv1 + conv2 + dense
    reference = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(8, 16, 3, stride=2, padding=1, groups=2), torch.nn.AvgPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(64, 10))
    assert report.macs == flopcount.profile(reference, torch.randn(2, 3, 16, 16)).macs
    assert report.params == _tree_size(variables["params"]) == sum(p.numel() for p in reference.parameters())


def test_cnn_runs_as_jax_does_with_flax_scopes(cnn):
    model, variables, x, report = cnn
    graph = rt.jax.to_graph((model, variables), x)
    np.testing.assert_allclose(_run(graph, x), np.asarray(model.apply(variables, x)), rtol=1e-4, atol=1e-5)
    rows = _rows(report)
    assert {"Conv_0", "Conv_1", "Dense_0"} <= set(rows)
    assert rows["Conv_1"].type == "Conv" and rows["Conv_1"].macs == 2 * 4 * 4 * 16 * 36
    assert {n.op_name for n in graph.nodes} >= {"conv", "max_pool", "avg_pool", "matmul"}


# --- transformer block (nnx) -------------------------------------------------------------------------

L, D, HEADS = 5, 16, 2


class Block(nnx.Module):
    def __init__(self, rngs):
        self.ln1, self.ln2 = nnx.LayerNorm(D, rngs=rngs), nnx.LayerNorm(D, rngs=rngs)
        self.attn = nnx.MultiHeadAttention(HEADS, D, decode=False, rngs=rngs)
        self.fc1, self.fc2 = nnx.Linear(D, 4 * D, rngs=rngs), nnx.Linear(4 * D, D, rngs=rngs)

    def __call__(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.fc2(jax.nn.gelu(self.fc1(self.ln2(x))))


def test_transformer_block():
    model, x = Block(nnx.Rngs(0)), _normal(2, L, D)
    report = flopcount.profile(model, x)
    projections = 2 * L * 4 * D * D                   # query, key, value, out
    scores_and_mix = 2 * 2 * HEADS * L * L * (D // HEADS)
    mlp = 2 * 2 * L * D * 4 * D
    assert report.macs == projections + scores_and_mix + mlp
    assert report.params == _tree_size(nnx.state(model, nnx.Param))
    rows = _rows(report)
    assert rows["attn"].type == "MultiHeadAttention" and rows["attn.query"].macs == 2 * L * D * D
    assert rows["ln1"].type == "LayerNorm" and rows["fc2"].macs == 2 * L * 4 * D * D
    graph = rt.jax.to_graph(model, x)
    np.testing.assert_allclose(_run(graph, x), np.asarray(model(x)), rtol=1e-4, atol=1e-5)


# --- layers scanned with nn.scan (Linen) -----------------------------------------------------------

DEPTH, WIDTH = 3, 8


class Layer(nn.Module):
    @nn.compact
    def __call__(self, h, _):
        return jnp.tanh(nn.Dense(WIDTH)(h)), None


class Stack(nn.Module):
    @nn.compact
    def __call__(self, x):
        layers = nn.scan(Layer, variable_axes={"params": 0}, split_rngs={"params": True}, length=DEPTH)
        return layers(name="layers")(x, None)[0]


def test_scanned_layers_count_every_step():
    model, x = Stack(), _normal(2, WIDTH)
    variables = model.init(jax.random.key(0), x)
    report = flopcount.profile((model, variables), x)
    assert report.macs == DEPTH * 2 * WIDTH * WIDTH
    assert report.params == _tree_size(variables["params"]) == DEPTH * (WIDTH * WIDTH + WIDTH)
    assert any(n.startswith("scan") and f"{DEPTH} steps, unrolled" in n for n in report.notes)
    assert any(row.name.startswith("layers") for row in report.rows if row.name)
    graph = rt.jax.to_graph((model, variables), x)
    np.testing.assert_allclose(_run(graph, x), np.asarray(model.apply(variables, x)), rtol=1e-4, atol=1e-5)
    assert math.isclose(report.flops, graph.cost().flops)


# --- state beyond parameters: batch statistics, dropout's PRNG key (nnx) ------------------------------

class Regularized(nnx.Module):
    def __init__(self, rngs):
        self.linear = nnx.Linear(4, 8, rngs=rngs)
        self.bn = nnx.BatchNorm(8, rngs=rngs)
        self.drop = nnx.Dropout(0.1, rngs=rngs)

    def __call__(self, x):
        return self.drop(self.bn(self.linear(x)))


def test_batch_statistics_are_buffers_and_dropouts_key_is_its_key_data():
    model, x = Regularized(nnx.Rngs(0)), _normal(2, 4)
    model.eval()
    graph = rt.jax.to_graph(model, x)
    assert graph.tensors["drop.rngs.key"].dtype.name == "uint32"   # threefry's two words
    report = flopcount.profile(model, x)
    assert report.params == _tree_size(nnx.state(model, nnx.Param)) == 4 * 8 + 8 + 2 * 8  # not mean, var
    np.testing.assert_allclose(_run(graph, x), np.asarray(model(x)), rtol=1e-4, atol=1e-5)
    model.train()    # dropout draws random bits: the draw is listed, the rest counted
    report = flopcount.profile(model, x)
    assert {"JAX random_bits"} <= {u.name for u in report.unsupported}
    assert report.macs == 2 * 4 * 8
