"""The inputs a model takes and the tensors made for them: one set of rules for
``flopcount.profile`` and the command line.

A model says what it expects as a list of :class:`InputSpec` (the zoo's default inputs, a
graph's inputs), or ``None`` when that is unknown (a Module: its ``forward`` decides).
:func:`resolve_inputs` merges the caller's shapes, batch size and dtypes into it,
:func:`make_tensors` builds the tensors, and :func:`bind_inputs` binds named inputs to the
model's ``forward`` parameters (or a graph's input names), so a model sees the same call
whether its inputs were given by position or by name.

    specs = resolve_inputs(None, [("x", (2, 4))], model="MLP")
    args, kwargs = bind_inputs(mlp, *make_tensors(specs, "cpu", keyword=True))
"""

from __future__ import annotations

import inspect
import os
import re
from dataclasses import dataclass, replace
from math import prod
from numbers import Integral
from .options import Option, option_error
from .runtime.dtypes import get_dtype
from .runtime.errors import ShapeError
from .runtime.graph import Graph
from .runtime.graph.tree import unflatten
from .runtime.nn.modules.module import Module


NAME = re.compile(r"^[A-Za-z_][\w.:/-]*$")
_DIM_SEPARATORS = re.compile(r"\s*[,xX*]\s*")
# ASCII digits only (str.isdigit takes '²'), and few enough for a dimension: int() refuses
# strings of more than 4300 digits, and no tensor has a dimension of 10**18
_DIM = re.compile(r"[0-9]{1,18}")


def quoted(text: str, limit: int = 80) -> str:
    """``text`` as the error shows it: repr, cut to ``limit`` characters (a message stays readable
    whatever was typed)."""
    return repr(text) if len(text) <= limit else repr(text[:limit]) + f"... ({len(text)} characters)"


def parse_shape(text: str) -> tuple:
    """``'[name=]1,3,224,224'`` (or ``1x3x224x224``, ``(1, 3, 224, 224)``) -> (name or None, dims).

    >>> parse_shape("x=1x3x32x32")
    ('x', (1, 3, 32, 32))
    """
    raw = text.strip()
    name = None
    if "=" in raw:
        name, _, raw = (part.strip() for part in raw.partition("="))
        if not NAME.match(name):
            raise ShapeError(f"--input-shape {quoted(text)}: {quoted(name)} is not an input name; write name=1x128")
    body = raw.strip().strip("()[]").strip()
    parts = _DIM_SEPARATORS.split(body) if body else []
    if not parts or not all(_DIM.fullmatch(p) for p in parts):
        raise ShapeError(f"--input-shape {quoted(text)}: expected positive integers of at most 18 digits such "
                         f"as 1,3,224,224 or 1x3x224x224 (name=1x128 for a named input)")
    dims = tuple(int(p) for p in parts)
    if any(d == 0 for d in dims):
        raise ShapeError(f"--input-shape {quoted(text)}: every dimension must be at least 1")
    return name, dims


@dataclass(frozen=True)
class InputSpec:
    """One model input: its name (``None`` when only its position is known), its full shape
    (batch included), dtype name, and for integer inputs the exclusive upper bound of valid
    values (token ids below the vocabulary size), ``None`` when unknown."""

    name: str | None
    shape: tuple
    dtype: str = "float32"
    high: int | None = None

    def describe(self) -> str:
        return (f"{self.name}=" if self.name else "") + format_shape(self.shape) + (
            f" ({self.dtype})" if self.dtype != "float32" else "")


def format_shape(shape) -> str:
    """``(1, 3, 224, 224)`` -> ``'1x3x224x224'``."""
    return "x".join(str(d) for d in shape)


def given_shapes(input_shape) -> list:
    """``profile(input_shape=...)`` as [(name or None, dims)]: one shape, a list of shapes in
    input order, or a dict ``{input name: shape}``. Every dim must be an integer >= 1.

    >>> given_shapes((1, 3, 8, 8)), given_shapes({"ids": (2, 16)})
    ([(None, (1, 3, 8, 8))], [('ids', (2, 16))])
    """
    if input_shape is None:
        return []
    if isinstance(input_shape, dict):
        pairs = [(str(name), shape) for name, shape in input_shape.items()]
    elif isinstance(input_shape, (tuple, list)) and not any(isinstance(d, (tuple, list)) for d in input_shape):
        pairs = [(None, input_shape)]   # one shape (its dims are checked below)
    elif isinstance(input_shape, (tuple, list)):
        pairs = [(None, shape) for shape in input_shape]
    else:
        raise ShapeError(f"input_shape {input_shape!r}: expected a shape such as (1, 3, 224, 224), a list of "
                         f"shapes, or a dict {{input name: shape}}")
    out = []
    for name, shape in pairs:
        where = f"input_shape[{name!r}]" if name is not None else "input_shape"
        if not isinstance(shape, (tuple, list)) or not shape:
            raise ShapeError(f"{where} {shape!r}: expected a non-empty tuple of dimensions such as (1, 3, 224, 224)")
        bad = [d for d in shape if not _is_int(d) or not 1 <= d <= MAX_DIM]
        if bad:
            shown = f"({', '.join(map(_shown, shape))})" if len(shape) <= MAX_DIMS else f"({len(shape)} dimensions)"
            raise ShapeError(f"{where} {shown}: every dimension must be an integer from 1 to 2**63 - 1, got "
                             f"{_shown(bad[0])}")
        out.append((name, tuple(int(d) for d in shape)))
    return out


MAX_DIM = 2**63 - 1  # a dimension is an int64 everywhere (ONNX, numpy's shapes)
MAX_DIMS = 64        # numpy's limit on an array's dimensions, so the runtime's on a tensor's


def _is_int(value) -> bool:
    return isinstance(value, Integral) and not isinstance(value, bool)


def _shown(value) -> str:
    """A dimension as an error message prints it: repr, except an integer too long to read (or
    for repr() to convert: Python refuses more than 4300 digits)."""
    if _is_int(value) and abs(value) > MAX_DIM:
        return f"<an integer of {value.bit_length()} bits>"
    return repr(value)


# --- what the model takes, merged with what the caller gave -----------------------------------

def resolve_inputs(expected: list | None, given: list, batch: int | None = None, dtypes: list | tuple = (),
                   model: str = "this model") -> list:
    """The inputs to build: ``expected`` (what the model takes, or ``None`` when unknown)
    overridden by ``given`` [(name or None, dims)], ``batch`` (the first dimension of every
    input) and ``dtypes`` [(name or None, dtype name)]. Raises ShapeError naming the expected
    inputs when the two do not fit together."""
    if not given and expected is None:
        raise option_error(ShapeError, f"{model} has no default input; give one with ", Option("input_shape"),
                           ", e.g. ", Option("input_shape", [(None, (1, 3, 224, 224))]))
    expected = list(expected or [])
    names = [s.name for s in expected]
    specs = list(expected)
    positional = [dims for name, dims in given if name is None]
    named = [(name, dims) for name, dims in given if name is not None]
    if expected and len(positional) > len(expected):
        raise ShapeError(f"{len(positional)} input shapes given, but the model takes {len(expected)}: "
                         + ", ".join(s.describe() for s in expected))
    for i, dims in enumerate(positional):
        if i < len(specs):
            specs[i] = _reshaped(specs[i], dims)
        else:
            specs.append(InputSpec(None, dims))
    for name, dims in named:
        if expected and name not in names:
            raise option_error(ShapeError, Option("input_shape", [(name, dims)]), f": the model has no input "
                               f"{name!r}; its inputs are " + ", ".join(s.describe() for s in expected))
        at = [i for i, s in enumerate(specs) if s.name == name]
        if at:
            specs[at[0]] = _reshaped(specs[at[0]], dims)
        else:
            specs.append(InputSpec(name, dims))
    if batch is not None:
        if batch < 1:
            raise option_error(ShapeError, Option("batch", batch), ": must be at least 1")
        specs = [replace(s, shape=(batch,) + tuple(s.shape[1:])) for s in specs]
    _check_ranks(specs)
    return _with_dtypes(specs, dtypes)


def _check_ranks(specs: list) -> None:
    for i, spec in enumerate(specs):
        if len(spec.shape) > MAX_DIMS:
            raise ShapeError(f"input {spec.name or f'#{i}'} has {len(spec.shape)} dimensions; a tensor has at most "
                             f"{MAX_DIMS}")


def _reshaped(spec: InputSpec, dims: tuple) -> InputSpec:
    if len(dims) != len(spec.shape):
        raise ShapeError(f"input shape {format_shape(dims)} has {len(dims)} dimensions, but input "
                         f"{spec.name or '#0'} expects {len(spec.shape)} ({spec.describe()})")
    return replace(spec, shape=tuple(dims))


def _with_dtypes(specs: list, dtypes) -> list:
    out = list(specs)
    for name, dtype in dtypes:
        hits = [i for i, s in enumerate(out) if name is None or s.name == name]
        if not hits:
            raise option_error(ShapeError, Option("dtype", {name: dtype}), f": the model has no input {name!r}; "
                               f"its inputs are " + ", ".join(s.describe() for s in out))
        for i in hits:
            # the bound of valid ids (a vocabulary) still holds in another integer dtype
            keep = not get_dtype(dtype).is_floating_point
            out[i] = replace(out[i], dtype=dtype, high=out[i].high if keep else None)
    return out


# --- tensors ----------------------------------------------------------------------------------

def make_tensors(specs: list, device, keyword: bool = False) -> tuple:
    """(args, kwargs) for the model. Floating inputs are standard normal; integer inputs are
    uniform below ``high`` when it is known and zeros otherwise (zero is a valid index for any
    embedding). On the meta device only shapes exist. With ``keyword`` named inputs become
    keyword arguments; otherwise every input is positional."""
    from .runtime import factories

    _check_fits(specs, device)
    args, kwargs = [], {}
    for spec in specs:
        dtype = get_dtype(spec.dtype)
        if str(device) == "meta":
            t = factories.empty(*spec.shape, dtype=dtype, device="meta")
        elif dtype.is_floating_point:
            t = factories.randn(*spec.shape, dtype=dtype, device=device)
        elif spec.high is not None:
            t = factories.randint(0, spec.high, size=spec.shape, dtype=dtype, device=device)
        else:
            t = factories.zeros(*spec.shape, dtype=dtype, device=device)
        if keyword and spec.name is not None:
            kwargs[spec.name] = t
        else:
            args.append(t)
    return tuple(args), kwargs


def _physical_memory() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # not every platform reports it
        return None


def _check_fits(specs: list, device) -> None:
    """Refuse, before allocating, CPU inputs larger than the machine's memory (a model file
    can declare any input shape); counting alone needs no data: device 'meta'."""
    if str(device) != "cpu":
        return
    need = sum(prod(s.shape) * get_dtype(s.dtype).itemsize for s in specs)
    have = _physical_memory()
    if have is not None and need > have:
        raise ShapeError(f"the inputs {', '.join(s.describe() for s in specs)} need {need / 2**30:.1f} GiB, more "
                         f"than this machine's {have / 2**30:.1f} GiB of memory; counting needs shapes only "
                         f"(device 'meta')")


def inputs_for(model, specs: list, device, keyword: bool = True) -> tuple:
    """(args, kwargs) built from ``specs`` and bound to ``model`` (see :func:`bind_inputs`);
    ``keyword=False`` passes every input by position (the zoo's input names are labels)."""
    args, kwargs = make_tensors(specs, device, keyword=keyword and not isinstance(model, Graph))
    if isinstance(model, Graph):
        if len(args) != len(model.inputs):
            raise ShapeError(f"graph {model.name} takes {len(model.inputs)} input(s), got {len(args)} shapes")
        return unflatten(model.input_tree, list(args))
    return bind_inputs(model, args, kwargs)


def bind_inputs(model, args: tuple, kwargs: dict) -> tuple:
    """(args, kwargs) for ``model(*args, **kwargs)``, checked before anything runs: named
    inputs are bound to ``forward``'s parameters (positional where ``forward`` allows it), or
    to a graph's input names; a call that does not fit is a ShapeError saying what the model
    takes."""
    if isinstance(model, Graph):
        return _bind_graph(model, tuple(args), dict(kwargs))
    target = model.forward if isinstance(model, Module) else model
    try:
        signature = inspect.signature(target)
    except (TypeError, ValueError):  # a builtin without a signature: let the call decide
        return tuple(args), dict(kwargs)
    name = f"{type(model).__name__}.forward" if isinstance(model, Module) else getattr(target, "__name__", "model")
    params = signature.parameters
    if not any(p.kind == p.VAR_KEYWORD for p in params.values()):
        unknown = [k for k in kwargs if k not in params or params[k].kind == params[k].POSITIONAL_ONLY]
        if unknown:  # before bind(), which would first complain about what is missing
            raise ShapeError(f"the inputs do not fit {name}{signature}: it has no parameter {unknown[0]!r}")
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError as exc:
        raise ShapeError(f"the inputs do not fit {name}{signature}: {exc}") from None
    return bound.args, bound.kwargs


def _flat(tree) -> bool:
    """Whether a graph's input tree is ``(args, kwargs)`` of tensors only (no nesting)."""
    if not (isinstance(tree, dict) and "tuple" in tree and len(tree["tuple"]) == 2):
        return False
    args, kwargs = tree["tuple"]
    return (isinstance(args, dict) and "tuple" in args and all(isinstance(t, int) for t in args["tuple"])
            and isinstance(kwargs, dict) and "dict" in kwargs and all(isinstance(t, int) for _, t in kwargs["dict"]))


def _bind_graph(graph: Graph, args: tuple, kwargs: dict) -> tuple:
    tree = graph.input_tree
    if not _flat(tree):  # nested inputs: only the call as traced (the executor checks it)
        return args, kwargs
    names = [v.name for v in graph.inputs]
    traced_kwargs = dict(tree["tuple"][1]["dict"])   # keyword -> leaf index
    takes = ", ".join(names) or "no inputs"
    if len(args) > len(names):
        raise ShapeError(f"graph {graph.name} takes {len(names)} input(s) ({takes}), got {len(args)}")
    leaves = list(args) + [None] * (len(names) - len(args))
    for key, value in kwargs.items():
        at = traced_kwargs.get(key, names.index(key) if key in names else None)
        if at is None:
            raise ShapeError(f"graph {graph.name} has no input {key!r}; its inputs are {takes}")
        if leaves[at] is not None:
            raise ShapeError(f"graph {graph.name}: input {key!r} is given twice (by position and by name)")
        leaves[at] = value
    missing = [n for n, leaf in zip(names, leaves) if leaf is None]
    if missing:
        raise ShapeError(f"graph {graph.name} takes {len(names)} input(s) ({takes}); missing {', '.join(missing)}")
    return unflatten(tree, leaves)


__all__ = ["InputSpec", "format_shape", "given_shapes", "resolve_inputs", "make_tensors",
           "inputs_for", "bind_inputs"]
