"""The command line's input options as text: shapes, dtypes and factory arguments.

    parse_shape("1,3,224,224")      -> (None, (1, 3, 224, 224))
    parse_shape("input_ids=1x128")  -> ("input_ids", (1, 128))

What they become (merged with what the model takes, then tensors) is ``flopcount.inputs``,
which ``flopcount.profile`` uses too.
"""

from __future__ import annotations

import ast

from ..inputs import NAME as _NAME, parse_shape, quoted as _quoted
from ..runtime.dtypes import get_dtype
from ..runtime.errors import FlopcountError

__all__ = ["parse_shape", "parse_value", "parse_dtype", "parse_factory_arg"]


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
