"""JAX's ways in, as :mod:`flopcount.loading` Targets: a jitted or plain function, a Flax
``nnx.Module``, a Linen module with its variables ``(module, variables)``, and a
``file.py:factory`` that returns ``(model, example_args)``.

A JAX model is a Target of kind ``jax`` until its example arguments are known; :func:`specialize`
then traces it for them (``rt.jax.to_graph``) and the Target holds the Graph, fixed to their
shapes, like a model file. jax is imported only then.

    target = specialize(load_model(model), examples=((jnp.ones((8, 784)),), {}))
    target.model        # Graph, scopes linear1, linear2 ...
"""

from __future__ import annotations

import sys

from .inputs import resolve_inputs
from .target import JAX, Target, graph_inputs
from .runtime import errors
from .runtime import jax as rt_jax
from .runtime.graph import Graph

FRAMEWORKS = ("jax",)   # profile(framework=...): the model is one of these frameworks' (else detected)


def is_model(obj, framework: str | None = None) -> bool:
    """Whether ``obj`` is a JAX model: a Flax module, ``(linen module, variables)``, a jitted
    function, or, once jax is imported (or ``framework="jax"``), any plain function."""
    if rt_jax.is_model(obj):
        return True
    plain = callable(obj) and not isinstance(obj, type) and type(obj).__module__ in ("builtins", "functools")
    return plain and (framework == "jax" or "jax" in sys.modules)


def load_model(model, label: str = "") -> Target:
    """A Target for a JAX model (traced later, by :func:`specialize`)."""
    return Target(model, label, JAX)


def from_factory(result, spec: str, label: str) -> Target:
    """The Target of what a ``file.py:factory`` returned for a JAX model: ``(model,
    example_args)`` (traced now), or a model alone (traced for the shapes given later)."""
    if isinstance(result, tuple) and len(result) == 2 and isinstance(result[1], (tuple, list)):
        model, args = result
        if is_model(model, "jax"):
            return specialize(load_model(model, label), examples=(tuple(args), {}))
    if is_model(result, "jax"):
        return load_model(result, label)
    raise errors.ModelFileError(f"{spec} returned {type(result).__name__}; for a JAX model return "
                                f"(function or Flax module, example_args) or ((linen_module, variables), "
                                f"example_args)")


def specialize(target: Target, specs: list | None = None, *, given: list = (), examples: tuple | None = None,
               train: bool = False) -> Target:
    """``target`` with a JAX model traced as a Graph for ``examples`` ((args, kwargs): arrays or
    ``jax.ShapeDtypeStruct``), or for ``specs``/``given`` shapes (as ShapeDtypeStructs). Other
    Targets, and models already traced, come back as they are. ``train`` is not a JAX notion:
    a Flax module runs as it is set (``nnx.Module.train()``/``eval()``, Linen's own flags)."""
    if target.kind != JAX or isinstance(target.model, Graph):
        return target
    name = target.label or _name_of(target.model)
    if examples is not None and (examples[0] or examples[1]):
        args, kwargs = examples
        if kwargs:
            raise errors.FlopcountError(f"{name}: a JAX model takes its example arguments by position, got "
                                        f"keyword(s) {', '.join(sorted(kwargs))}")
    else:
        if specs is None:
            specs = resolve_inputs(target.expected, list(given), model=name)
        from .runtime.jax.capture import import_jax

        jax = import_jax()
        args = tuple(jax.ShapeDtypeStruct(tuple(s.shape), s.dtype) for s in specs)
    graph = rt_jax.to_graph(target.model, *args, name=_name_of(target.model))
    return Target(graph, target.label, JAX, graph_inputs(graph), fixed=True,
                  notes=list(target.notes) + list(graph.notes), path=target.path, jax_call=(target.model, tuple(args)))


def _name_of(model) -> str:
    if isinstance(model, tuple):
        return type(model[0]).__name__
    return getattr(model, "__name__", None) or type(model).__name__


__all__ = ["FRAMEWORKS", "is_model", "load_model", "from_factory", "specialize"]
