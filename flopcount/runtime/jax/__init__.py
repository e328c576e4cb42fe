"""JAX functions and Flax modules as runtime Graphs: ``rt.jax.to_graph(fn, *example_args)``.

    import jax.numpy as jnp, flopcount.runtime as rt
    graph = rt.jax.to_graph(lambda x, w: jnp.tanh(x @ w), jnp.ones((2, 3)), jnp.ones((3, 4)))
    [n.op_name for n in graph.nodes]        # ['matmul', 'tanh']

The function is traced by JAX itself (``jax.make_jaxpr``, ``capture.py``) and each equation of
the jaxpr is converted into runtime ops (``converters/``, ``importer.py``), in the module scope
Flax recorded for it. A Flax ``nnx.Module`` is called with the example arguments; a Linen
module comes with its variables as a pair ``(module, variables)``; their parameters become the
graph's parameters, named by their path in the variable tree (``Dense_0.kernel``).

jax and flax are imported only when one of these functions is called: ``import
flopcount.runtime`` does not need them. Without them they raise one line saying what to install.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping

from .capture import INSTALL


def _from_jax(cls) -> bool:
    return any(getattr(c, "__module__", "").split(".")[0] in ("jax", "jaxlib", "flax") for c in cls.__mro__)


def is_model(obj) -> bool:
    """Whether ``obj`` is a JAX model flopcount takes: a Flax module (nnx or Linen, the latter as
    ``(module, variables)``) or a jitted function; read from the object's type, without
    importing jax. (A plain Python function is JAX when its example arguments are: see
    :func:`is_example`.)"""
    if isinstance(obj, tuple) and len(obj) == 2 and not isinstance(obj[0], type):
        return _from_jax(type(obj[0])) and callable(obj[0]) and isinstance(obj[1], Mapping)
    return not isinstance(obj, type) and callable(obj) and _from_jax(type(obj))


def is_example(value) -> bool:
    """Whether ``value`` is a JAX array or a ``jax.ShapeDtypeStruct`` (without importing jax)."""
    return "jax" in sys.modules and _from_jax(type(value)) and hasattr(value, "shape") and hasattr(value, "dtype")


def to_graph(model, *example_args, name: str | None = None):
    """The Graph of ``model(*example_args)`` (see the module docstring); shapes and dtypes are
    those of the examples (arrays or ``jax.ShapeDtypeStruct``). Remarks (loops not counted,
    which branch of a ``cond`` was counted, XLA's own FLOP count) are in ``graph.notes``."""
    from .capture import capture
    from .importer import convert

    captured = capture(model, example_args)
    graph = convert(captured, name)
    graph.notes = list(captured.notes) + list(graph.notes)
    return graph


__all__ = ["is_model", "is_example", "to_graph", "INSTALL"]
