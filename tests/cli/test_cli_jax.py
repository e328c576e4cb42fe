"""``flopcount file.py:factory --framework jax``: the factory returns a JAX model and its
example arguments; the report is the same as ``flopcount.profile`` gives in Python."""

from __future__ import annotations

import json
import textwrap

import pytest

pytest.importorskip("jax")
pytest.importorskip("flax")

from conftest import assert_bad_input  # noqa: E402

SOURCE = textwrap.dedent('''
    import jax
    import jax.numpy as jnp
    from flax import linen as nn, nnx


    class MLP(nnx.Module):
        def __init__(self, rngs):
            self.linear1 = nnx.Linear(6, 4, rngs=rngs)
            self.linear2 = nnx.Linear(4, 2, rngs=rngs)

        def __call__(self, x):
            return self.linear2(jax.nn.relu(self.linear1(x)))


    def mlp():
        return MLP(nnx.Rngs(0)), (jnp.ones((3, 6)),)


    def linen_dense():
        module = nn.Dense(5)
        x = jax.ShapeDtypeStruct((2, 7), jnp.float32)
        return (module, module.init(jax.random.key(0), jnp.ones((2, 7)))), (x,)


    def plain():
        return (lambda x: jnp.tanh(x) @ jnp.ones((4, 3))), (jnp.ones((2, 4)),)


    def not_a_pair():
        return 42
''')


@pytest.fixture(scope="module")
def jax_file(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("jax") / "jax_nets.py"
    path.write_text(SOURCE)
    return str(path)


def _json(result) -> dict:
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def test_a_flax_module_and_its_example_arguments(run, jax_file):
    doc = _json(run(f"{jax_file}:mlp", "--framework", "jax", "--format", "json", "-q"))
    assert doc["totals"]["macs"] == 3 * (6 * 4 + 4 * 2)
    assert doc["totals"]["params"] == 6 * 4 + 4 + 4 * 2 + 2
    assert {"linear1", "linear2"} <= {row["name"] for row in doc["rows"]}
    assert any(note.startswith("XLA cost_analysis") for note in doc["notes"])


def test_a_linen_module_with_its_variables_and_a_plain_function(run, jax_file):
    doc = _json(run(f"{jax_file}:linen_dense", "--framework", "jax", "--format", "json", "-q"))
    assert doc["totals"]["macs"] == 2 * 7 * 5 and doc["totals"]["params"] == 7 * 5 + 5
    doc = _json(run(f"{jax_file}:plain", "--format", "json", "-q"))   # detected without --framework
    assert doc["totals"]["macs"] == 2 * 4 * 3


def test_a_factory_that_returns_no_jax_model_is_one_line(run, jax_file):
    assert_bad_input(run(f"{jax_file}:not_a_pair", "--framework", "jax"), "returned int", "example_args")


def test_framework_applies_to_factories(run):
    assert_bad_input(run("resnet18", "--framework", "jax"), "--framework jax", "file.py:factory")
