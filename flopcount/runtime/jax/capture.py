"""Trace a JAX model into a closed jaxpr, with names for its inputs and parameters.

* a plain or jitted function: ``jax.make_jaxpr(fn)(*example_args)``; every array leaf of the
  arguments is a graph input, named after the function's parameter (``x``; ``x_0``, ``x_1``
  for the leaves of a pytree argument);
* an ``nnx.Module``: split into its graph definition and state, and traced as
  ``merge(graphdef, state)(*example_args)``; ``nnx.Param`` leaves are parameters, other
  variables (batch statistics) buffers, named by their path (``linear1.kernel``). nnx pushes
  no name scopes of its own, so each submodule's call runs inside ``jax.named_scope(path)``
  while tracing, which JAX records in every equation's ``source_info.name_stack``;
* a Linen module with its variables, ``(module, variables)``: traced as
  ``module.apply(variables, *example_args)``; the ``params`` collection holds parameters
  (``Dense_0.kernel``), the other collections buffers (``batch_stats.BatchNorm_0.mean``).
  Linen pushes each module's path as a name scope itself (``Model/Dense_0``).

Where XLA can compile the function, ``cost_analysis()`` of the compiled function gives its own
FLOP count, kept as a note beside flopcount's.
"""

from __future__ import annotations

import contextlib
import inspect
from dataclasses import dataclass, field

from ..errors import FlopcountError
from ..optional import require

INSTALL = "pip install 'flopcount[jax]'"


@dataclass
class Leaf:
    """One input variable of the jaxpr: a model input, a parameter or a buffer."""

    name: str
    kind: str              # "input", "param" or "buffer"
    array: object = None   # the parameter's or buffer's value (a numpy array); None for inputs


@dataclass
class Captured:
    jaxpr: object                     # jax.extend.core.ClosedJaxpr
    leaves: list                      # a Leaf per jaxpr invar, in order
    name: str
    root_scope: str = ""              # Linen's root module name, stripped from name stacks
    absolute_scopes: bool = False     # each name-stack entry is a full module path (nnx, as pushed here)
    module_types: dict = field(default_factory=dict)   # scope -> module class name
    notes: list = field(default_factory=list)


def import_jax():
    return require("jax", f"profiling a JAX model needs jax: {INSTALL}")


def path_name(path) -> str:
    """A pytree key path as a dotted name: (DictKey('linear1'), GetAttrKey('value')) -> 'linear1'."""
    parts = []
    for key in path:
        for attr in ("key", "name", "idx"):
            if hasattr(key, attr):
                parts.append(str(getattr(key, attr)))
                break
        else:
            parts.append(str(key))
    if parts and parts[-1] == "value":   # an nnx Variable's payload
        parts.pop()
    return ".".join(parts)


def capture(model, example_args: tuple) -> Captured:
    """The closed jaxpr of ``model`` on ``example_args`` and what its inputs are. Arguments
    that are Python bools, ints, strings or None are static (baked into the trace, as
    ``jax.jit``'s ``static_argnums`` would: ``deterministic=True``, a loop's bound)."""
    jax = import_jax()
    dynamic, full = _static_split(example_args)
    if isinstance(model, tuple):
        return _capture_linen(jax, *model, example_args, dynamic, full)
    if _is_nnx(model):
        return _capture_nnx(jax, model, example_args, dynamic, full)
    name = getattr(model, "__name__", None) or getattr(getattr(model, "__wrapped__", None), "__name__", "jax_fn")

    def call(*inputs):
        return model(*full(inputs))

    leaves = _input_leaves(jax, model, example_args)
    closed = _trace(jax, call, dynamic, name)
    return Captured(closed, leaves, name, notes=_xla_flops(jax, call, dynamic))


def _is_static(value) -> bool:
    return value is None or isinstance(value, (bool, int, str))


def _static_split(args: tuple) -> tuple:
    """(the traced arguments, a function giving back all of them from those)."""
    dynamic = tuple(a for a in args if not _is_static(a))

    def full(inputs) -> tuple:
        given = iter(inputs)
        return tuple(a if _is_static(a) else next(given) for a in args)

    return dynamic, full


def pure_call(model, args: tuple) -> tuple:
    """(function, its arguments) that compute ``model(*args)``, pure for ``jax.jit``: a Linen
    module applied to its variables, an nnx module merged from its state, a function as it is;
    static arguments (see :func:`capture`) bound into the function."""
    dynamic, full = _static_split(args)
    if isinstance(model, tuple):
        module, variables = model
        return (lambda variables, *inputs: module.apply(variables, *full(inputs))), (variables,) + dynamic
    if _is_nnx(model):
        from flax import nnx

        graphdef, state = nnx.split(model)
        return (lambda state, *inputs: nnx.merge(graphdef, state)(*full(inputs))), (state,) + dynamic
    return (lambda *inputs: model(*full(inputs))), dynamic


def _trace(jax, fn, args, name):
    try:
        return jax.make_jaxpr(fn)(*args)
    except FlopcountError:
        raise
    except Exception as exc:   # the user's model failed to trace: one line
        text = " ".join(str(exc).split())[:300]
        raise FlopcountError(f"{name}: tracing the JAX model failed ({type(exc).__name__}: {text})") from exc


def _input_leaves(jax, fn, args, skip: int = 0) -> list:
    """A Leaf per array of ``args``, named after ``fn``'s parameters (less the first ``skip``)."""
    try:
        params = [p.name for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)][skip:]
    except (TypeError, ValueError):
        params = []
    leaves = []
    for i, arg in enumerate(args):
        if _is_static(arg):
            continue
        base = params[i] if i < len(params) else f"input_{i}"
        flat = jax.tree_util.tree_flatten_with_path(arg)[0]
        if len(flat) == 1 and not flat[0][0]:
            leaves.append(Leaf(base, "input"))
        else:
            leaves.extend(Leaf(f"{base}.{path_name(p)}", "input") for p, _ in flat)
    return leaves


def _state_leaves(jax, tree, kind_of) -> list:
    import numpy as np

    def data(value):   # a PRNG key as its key data (the importer's layout of key values)
        if jax.dtypes.issubdtype(getattr(value, "dtype", None), jax.dtypes.prng_key):
            value = jax.random.key_data(value)
        return np.asarray(value)

    return [Leaf(*kind_of(path_name(p)), data(v)) for p, v in jax.tree_util.tree_flatten_with_path(tree)[0]]


def _is_nnx(model) -> bool:
    return any(c.__module__.startswith("flax.nnx") and c.__name__ == "Module" for c in type(model).__mro__)


def _capture_nnx(jax, model, args, dynamic, full) -> Captured:
    from flax import nnx

    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    types: dict = {}

    def call(params, rest, *inputs):
        merged = nnx.merge(graphdef, params, rest)
        with _nnx_scopes(nnx, merged, types):
            return merged(*full(inputs))

    name = type(model).__name__
    leaves = (_state_leaves(jax, params, lambda n: (n, "param")) + _state_leaves(jax, rest, lambda n: (n, "buffer"))
              + _input_leaves(jax, type(model).__call__, args, skip=1))
    closed = _trace(jax, call, (params, rest) + dynamic, name)
    return Captured(closed, leaves, name, absolute_scopes=True, module_types=types,
                    notes=_xla_flops(jax, call, (params, rest) + dynamic))


@contextlib.contextmanager
def _nnx_scopes(nnx, root, types: dict):
    """Each submodule's ``__call__`` inside ``jax.named_scope(its path)`` while the block runs.
    Special methods are looked up on the class, so the classes' ``__call__`` are wrapped (all
    originals read before any is replaced: a subclass calls its own original, once)."""
    import jax

    paths = {}
    for path, module in _iter_modules(nnx, root):
        if path:
            paths[id(module)] = ".".join(str(p) for p in path)
            types[paths[id(module)]] = type(module).__name__
    classes = {type(m) for _, m in _iter_modules(nnx, root) if id(m) in paths}
    originals = {cls: (cls.__dict__.get("__call__"), cls.__call__) for cls in classes}

    def wrap(original):
        def scoped(self, *a, **k):
            path = paths.get(id(self))
            if path is None:
                return original(self, *a, **k)
            with jax.named_scope(path):
                return original(self, *a, **k)
        return scoped

    for cls, (_, resolved) in originals.items():
        cls.__call__ = wrap(resolved)
    try:
        yield
    finally:
        for cls, (own, _) in originals.items():
            if own is None:
                del cls.__call__
            else:
                cls.__call__ = own


def _iter_modules(nnx, root):
    if hasattr(nnx, "iter_modules"):
        return list(nnx.iter_modules(root))
    return list(root.iter_modules())


def _capture_linen(jax, module, variables, args, dynamic, full) -> Captured:
    from flax import linen

    types: dict = {}

    def record(call, call_args, call_kwargs, context):
        # every method call of a bound module: its path names the scope, its class the type
        path = ".".join(str(p) for p in getattr(context.module, "path", ()) or ())
        if path:
            types.setdefault(path, type(context.module).__name__)
        return call(*call_args, **call_kwargs)

    def apply(variables, *inputs):
        with linen.intercept_methods(record):
            return module.apply(variables, *full(inputs))

    def kind_of(name: str):
        collection, _, rest = name.partition(".")
        return (rest, "param") if collection == "params" else (name, "buffer")

    name = type(module).__name__
    leaves = _state_leaves(jax, variables, kind_of) + _input_leaves(jax, type(module).__call__, args, skip=1)
    closed = _trace(jax, apply, (variables,) + dynamic, name)
    return Captured(closed, leaves, name, root_scope=name, module_types=types,
                    notes=_xla_flops(jax, apply, (variables,) + dynamic))


def _xla_flops(jax, fn, args) -> list:
    """["XLA cost_analysis: N flops"] where XLA compiles ``fn`` and reports a count, else []."""
    try:
        analysis = jax.jit(fn).lower(*args).compile().cost_analysis()
    except Exception:   # noqa: BLE001 - XLA's count is a remark beside ours, never a failure
        return []
    if isinstance(analysis, (list, tuple)):
        analysis = analysis[0] if analysis else None
    flops = analysis.get("flops") if isinstance(analysis, dict) else None
    if not isinstance(flops, (int, float)) or flops < 0:
        return []
    return [f"XLA cost_analysis: {int(flops)} flops (XLA's own count of the compiled function, for comparison)"]


__all__ = ["Captured", "Leaf", "capture", "path_name", "pure_call", "import_jax"]
