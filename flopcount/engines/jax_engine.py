"""``engine="jax"``: a JAX model timed by JAX itself, beside flopcount's counts of its jaxpr.

The model is jitted as one function (``rt.jax.capture.pure_call``: a Linen module applied to
its variables, an nnx module merged from its state) and called on the example arguments it was
traced with (a ``jax.ShapeDtypeStruct`` gets seeded normal values, or zeros for integers). The
first call compiles; ``warmup`` calls follow, then ``repeat`` timed calls, each waited for
with ``block_until_ready``. XLA fuses the model's ops into kernels of its own choosing, so only
the whole call is timed: module and op rows keep flopcount's counts without times.

    ms = time_call(model, (x,), warmup=1, repeat=5)      # (median ms, min ms)
"""

from __future__ import annotations

import statistics
import time

NAME = "jax"
NOTE = ("engine jax: the whole jitted call timed by JAX (XLA fuses ops into its own kernels, so "
        "module and op rows have no times)")


def _concrete(jax, args: tuple) -> tuple:
    """The arguments with every ShapeDtypeStruct made an array (seeded normal, or zeros)."""
    import numpy as np

    rng = np.random.default_rng(0)

    def make(a):
        if isinstance(a, jax.ShapeDtypeStruct):
            dtype = np.dtype(a.dtype)
            if dtype.kind == "f":
                return jax.numpy.asarray(rng.standard_normal(a.shape), dtype)
            return jax.numpy.zeros(a.shape, dtype)
        return a

    return tuple(jax.tree_util.tree_map(make, a) for a in args)


def time_call(model, args: tuple, *, warmup: int = 1, repeat: int = 5) -> tuple:
    """(median, min) milliseconds of ``model(*args)`` jitted (see the module docstring)."""
    from ..runtime.jax.capture import import_jax, pure_call

    jax = import_jax()
    fn, inputs = pure_call(model, args)
    call = jax.jit(fn)
    inputs = _concrete(jax, inputs)
    jax.block_until_ready(call(*inputs))   # compiles
    for _ in range(warmup):
        jax.block_until_ready(call(*inputs))
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        jax.block_until_ready(call(*inputs))
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1e3, min(samples) * 1e3


def join(report, times: tuple) -> None:
    """The whole call's times on the report; rows keep no times (see NOTE)."""
    for row in report.rows:
        row.latency_ms = row.latency_min_ms = None
    for record in report.by_op("forward"):
        record.latency_ms = None
    report.latency_ms, report.latency_min_ms = times
    report.notes.append(NOTE)
    report.engine = NAME


__all__ = ["NAME", "NOTE", "time_call", "join"]
