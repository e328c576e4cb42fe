"""The command line's input options as text: shapes, dtypes and factory arguments.

    parse_shape("1,3,224,224")      -> (None, (1, 3, 224, 224))
    parse_shape("input_ids=1x128")  -> ("input_ids", (1, 128))

What they become (merged with what the model takes, then tensors) is ``flopcount.inputs``,
which ``flopcount.profile`` uses too.
"""

from __future__ import annotations

import ast
import re

from ..runtime.dtypes import get_dtype
from ..runtime.errors import FlopcountError, ShapeError

_NAME = re.compile(r"^[A-Za-z_][\w.:/-]*$")
_DIM_SEPARATORS = re.compile(r"\s*[,xX*]\s*")
# ASCII digits only (str.isdigit takes '²'), and few enough for a dimension: int() refuses
# strings of more than 4300 digits, and no tensor has a dimension of 10**18
_DIM = re.compile(r"[0-9]{1,18}")


def _quoted(text: str, limit: int = 80) -> str:
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
        if not _NAME.match(name):
            raise ShapeError(f"--input-shape {_quoted(text)}: {_quoted(name)} is not an input name; write name=1x128")
    body = raw.strip().strip("()[]").strip()
    parts = _DIM_SEPARATORS.split(body) if body else []
    if not parts or not all(_DIM.fullmatch(p) for p in parts):
        raise ShapeError(f"--input-shape {_quoted(text)}: expected positive integers of at most 18 digits such "
                         f"as 1,3,224,224 or 1x3x224x224 (name=1x128 for a named input)")
    dims = tuple(int(p) for p in parts)
    if any(d == 0 for d in dims):
        raise ShapeError(f"--input-shape {_quoted(text)}: every dimension must be at least 1")
    return name, dims


def parse_value(text: str) -> tuple:
    """``'name=1,3,-1'`` -> (name, [numbers]): the values of an input that carries a shape.

    >>> parse_value("k=5"), parse_value("scales=1,1,2.5,2.5")
    (('k', [5]), ('scales', [1, 1, 2.5, 2.5]))
    """
    name, sep, raw = (part.strip() for part in text.partition("="))
    if not sep or not _NAME.match(name):
        raise FlopcountError(f"--input-value {_quoted(text)}: write name=values, e.g. shape=1,3,-1")
    try:
        values = [ast.literal_eval(v.strip()) for v in raw.split(",")] if raw else []
    except (ValueError, SyntaxError, RecursionError, MemoryError):  # the last two: nesting too deep
        values = None
    if values is None or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        raise FlopcountError(f"--input-value {_quoted(text)}: the values must be numbers separated by commas")
    return name, values


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
        raise FlopcountError(f"--factory-arg {_quoted(text)}: expected key=value, e.g. width=64")
    try:
        return key, ast.literal_eval(value.strip())
    except (ValueError, SyntaxError):
        return key, value.strip()
    except (RecursionError, MemoryError):
        # Python's parser gives up on deep nesting (30,000 '+' terms, 100,000 '-' signs) with
        # these, before allocating anything large
        raise FlopcountError(f"--factory-arg {_quoted(text)}: nested too deeply to read as a Python literal") from None


__all__ = ["parse_shape", "parse_dtype", "parse_factory_arg"]
