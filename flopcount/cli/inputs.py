"""The command line's input options: shapes, dtypes, factory arguments, and the tensors they make.

    parse_shape("1,3,224,224")      -> (None, (1, 3, 224, 224))
    parse_shape("input_ids=1x128")  -> ("input_ids", (1, 128))

A model says what it expects as a list of :class:`InputSpec` (the zoo's default inputs, a
model file's graph inputs); :func:`resolve_inputs` merges the user's ``--input-shape``,
``--batch`` and ``--dtype`` into it and :func:`make_tensors` builds the tensors.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, replace

from ..runtime.dtypes import get_dtype
from ..runtime.errors import FlopcountError, ShapeError

_NAME = re.compile(r"^[A-Za-z_][\w.:/-]*$")
_DIM_SEPARATORS = re.compile(r"\s*[,xX*]\s*")


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


def parse_shape(text: str) -> tuple:
    """``'[name=]1,3,224,224'`` (or ``1x3x224x224``, ``(1, 3, 224, 224)``) -> (name or None, dims).

    >>> parse_shape("x=1x3x32x32")
    ('x', (1, 3, 32, 32))
    """
    raw = text.strip()
    name = None
    if "=" in raw:
        name, _, raw = (part.strip() for part in raw.partition("="))
        if not _NAME.match(name):
            raise ShapeError(f"--input-shape {text!r}: {name!r} is not an input name; write name=1x128")
    body = raw.strip().strip("()[]").strip()
    parts = _DIM_SEPARATORS.split(body) if body else []
    if not parts or not all(p.isdigit() for p in parts):
        raise ShapeError(f"--input-shape {text!r}: expected positive integers such as 1,3,224,224 "
                         f"or 1x3x224x224 (name=1x128 for a named input)")
    dims = tuple(int(p) for p in parts)
    if any(d == 0 for d in dims):
        raise ShapeError(f"--input-shape {text!r}: every dimension must be at least 1")
    return name, dims


def parse_dtype(text: str) -> tuple:
    """``'int64'`` (every input) or ``'input_ids=int64'`` -> (name or None, dtype name)."""
    name, _, value = text.rpartition("=")
    try:
        dtype = get_dtype(value.strip()).name
    except TypeError as exc:
        raise FlopcountError(f"--dtype {text!r}: {exc}") from None
    return (name.strip() or None), dtype


def parse_factory_arg(text: str) -> tuple:
    """``'key=value'`` -> (key, value as a Python literal, or the plain string if it is none).

    >>> parse_factory_arg("width=64"), parse_factory_arg("act=relu")
    (('width', 64), ('act', 'relu'))
    """
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key.isidentifier():
        raise FlopcountError(f"--factory-arg {text!r}: expected key=value, e.g. width=64")
    try:
        return key, ast.literal_eval(value.strip())
    except (ValueError, SyntaxError):
        return key, value.strip()


def resolve_inputs(expected: list | None, given: list, batch: int | None = None,
                   dtypes: list | tuple = (), model: str = "this model") -> list:
    """The inputs to build: ``expected`` (what the model takes, or ``None`` when unknown)
    overridden by ``given`` (``parse_shape`` results), ``--batch`` (the first dimension of
    every input) and ``dtypes`` (``parse_dtype`` results). Raises ShapeError naming the
    expected inputs when the two do not fit together."""
    expected = list(expected or [])
    names = [s.name for s in expected]
    if not given and not expected:
        raise ShapeError(f"{model} has no default input; give one with --input-shape, e.g. 1,3,224,224")
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
            raise ShapeError(f"--input-shape {name}=...: the model has no input {name!r}; its inputs are "
                             + ", ".join(s.describe() for s in expected))
        at = [i for i, s in enumerate(specs) if s.name == name]
        if at:
            specs[at[0]] = _reshaped(specs[at[0]], dims)
        else:
            specs.append(InputSpec(name, dims))
    if batch is not None:
        if batch < 1:
            raise ShapeError(f"--batch {batch}: must be at least 1")
        specs = [replace(s, shape=(batch,) + tuple(s.shape[1:])) for s in specs]
    return _with_dtypes(specs, dtypes)


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
            raise ShapeError(f"--dtype {name}={dtype}: the model has no input {name!r}; its inputs are "
                             + ", ".join(s.describe() for s in out))
        for i in hits:
            # the bound of valid ids (a vocabulary) still holds in another integer dtype
            keep = not get_dtype(dtype).is_floating_point
            out[i] = replace(out[i], dtype=dtype, high=out[i].high if keep else None)
    return out


def make_tensors(specs: list, device, keyword: bool = False) -> tuple:
    """(args, kwargs) for the model. Floating inputs are standard normal; integer inputs are
    uniform below ``high`` when it is known and zeros otherwise (zero is a valid index for any
    embedding). On the meta device only shapes exist. With ``keyword`` named inputs become
    keyword arguments of ``forward``; otherwise every input is positional."""
    from ..runtime import factories

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


__all__ = ["InputSpec", "format_shape", "parse_shape", "parse_dtype", "parse_factory_arg", "resolve_inputs",
           "make_tensors"]
