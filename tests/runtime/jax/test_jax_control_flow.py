"""Loops and branches of JAX functions: a ``while_loop`` whose trip count is data is named as
not counted (with its body's cost per iteration); a ``cond`` prices both branches and counts the
larger; ``fori_loop`` with static bounds is a scan, unrolled and counted step by step; a
primitive without a converter is listed as unsupported, and the door takes jitted functions
and ``ShapeDtypeStruct`` arguments."""

from __future__ import annotations

import sys

import numpy as np
import pytest

jax = pytest.importorskip("jax")

import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

import flopcount  # noqa: E402
import flopcount.runtime as rt  # noqa: E402


def _spec(*shape):
    return jax.ShapeDtypeStruct(shape, jnp.float32)


def test_while_loop_with_a_dynamic_trip_count_is_named_not_counted():
    def grow(x, w, n):
        return lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, jnp.tanh(c[1] @ w)), (0, x))[1]

    report = flopcount.profile(grow, _spec(2, 4), _spec(4, 4), jax.ShapeDtypeStruct((), jnp.int32))
    (note,) = [n for n in report.notes if n.startswith("while_loop")]
    assert "not static" in note and "not counted" in note
    # the matmul and the tanh (the counter's add is priced on its first value, a constant: folded)
    assert f"{2 * 2 * 4 * 4 + 2 * 4} FLOPs per iteration" in note
    assert report.macs == 0
    assert [u.name for u in report.unsupported] == ["JAX while"]


def test_cond_counts_the_larger_branch_and_lists_both():
    def pick(x, w):
        return lax.cond(x.sum() > 0, lambda x: (x @ w) @ w, lambda x: x * 2.0, x)

    report = flopcount.profile(pick, _spec(2, 4), _spec(4, 4))
    (note,) = [n for n in report.notes if n.startswith("cond")]
    assert f"branch 0: {2 * 4} FLOPs" in note and f"branch 1: {2 * 2 * 2 * 4 * 4} FLOPs" in note
    assert "branch 1 is counted" in note
    assert report.macs == 2 * 2 * 4 * 4


def test_fori_loop_with_static_bounds_is_unrolled_and_runs_as_jax_does():
    def power(x, w):
        return lax.fori_loop(0, 3, lambda i, h: jnp.tanh(h @ w) + i, x)

    x = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)
    w = (np.random.default_rng(1).standard_normal((4, 4)) * 0.5).astype(np.float32)
    graph = rt.jax.to_graph(jax.jit(power), x, w)
    assert graph.cost().macs == 3 * 2 * 4 * 4
    out = rt.GraphModule(graph)(rt.tensor(x), rt.tensor(w)).numpy()
    np.testing.assert_allclose(out, np.asarray(power(x, w)), rtol=1e-4, atol=1e-5)


def test_a_primitive_without_converter_is_listed_unsupported():
    def sort_rows(x):
        return jnp.sort(x, axis=-1) @ jnp.ones((4, 3))

    report = flopcount.profile(sort_rows, _spec(2, 4))
    assert [u.name for u in report.unsupported] == ["JAX sort"]
    assert any("JAX primitive(s) sort (1 call)" in n for n in report.notes)
    assert report.macs == 2 * 4 * 3
    assert report.params == 0   # ones((4, 3)) is made inside the function: a constant, no parameter


def test_profiling_does_not_import_jax_for_other_models():
    code = ("import sys, flopcount, flopcount.runtime as rt; "
            "flopcount.profile(rt.nn.Linear(3, 2), rt.ones(1, 3)); "
            "assert 'jax' not in sys.modules and 'flax' not in sys.modules")
    import subprocess

    subprocess.run([sys.executable, "-c", code], check=True)


def test_python_bools_and_ints_are_static_arguments():
    def steps(x, w, n, relu):      # n bounds the loop: static, so a scan of n steps
        h = lax.fori_loop(0, n, lambda i, h: h @ w, x)
        return jnp.maximum(h, 0.0) if relu else h

    report = flopcount.profile(steps, _spec(2, 4), _spec(4, 4), 3, True, engine="jax", warmup=0, repeat=1)
    assert report.macs == 3 * 2 * 4 * 4
    assert [v.name for v in rt.jax.to_graph(steps, np.ones((2, 4), np.float32), np.eye(4, dtype=np.float32), 3,
                                            False).inputs] == ["x", "w"]


def test_eager_mode_is_refused_for_a_jax_model():
    with pytest.raises(flopcount.FlopcountError, match="a JAX model, traced into a graph"):
        flopcount.profile(lambda x: jnp.tanh(x), _spec(2, 4), mode="eager")
