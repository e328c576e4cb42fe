"""How an error names an option of :func:`flopcount.profile`, so that each caller reads it in
its own words.

A message that tells the user which option to change holds :class:`Option` parts. ``str()``
of the error spells them as Python arguments (``input_shape=(1, 3, 224, 224)``); the command
line re-spells the same parts as its flags (``-i 1x3x224x224``) with :func:`spelled`. Library
code therefore holds no command-line wording.

    >>> exc = option_error(flopcount.ShapeError, "MLP has no default input; give one with ",
    ...                    Option("input_shape", [(None, (1, 4))]))
    >>> str(exc)
    'MLP has no default input; give one with input_shape=(1, 4)'
"""

from __future__ import annotations

from typing import Callable

from .runtime.errors import FlopcountError

_NO_VALUE = object()


class Option:
    """An option of ``profile()`` inside a message: its name and, optionally, the value to give.

    ``input_shape``'s value is a list of (input name or None, shape), the other options' a
    plain value; in a dict value, ``...`` stands for a value the user must fill in."""

    __slots__ = ("name", "value")

    def __init__(self, name: str, value=_NO_VALUE):
        self.name = name
        self.value = value

    @property
    def has_value(self) -> bool:
        return self.value is not _NO_VALUE

    def __str__(self) -> str:
        return python_spelling(self)

    def __repr__(self) -> str:
        return f"Option({self.name!r}" + (f", {self.value!r})" if self.has_value else ")")


def python_spelling(option: Option) -> str:
    """An option as a keyword argument of ``profile()``."""
    if not option.has_value:
        return option.name
    if option.name == "input_shape":
        shapes = option.value
        if all(name is None for name, _ in shapes):
            dims = [tuple(d) for _, d in shapes]
            return f"input_shape={dims[0] if len(dims) == 1 else dims}"
        return "input_shape={" + ", ".join(f"{name!r}: {tuple(dims)}" for name, dims in shapes) + "}"
    if isinstance(option.value, dict):
        return f"{option.name}={{" + ", ".join(f"{key!r}: {shown(item)}" for key, item in option.value.items()) + "}"
    return f"{option.name}={option.value!r}"


def shown(value) -> str:
    """A value in a message: ``...`` for one the user must fill in, else its repr."""
    return "..." if value is ... else repr(value)


def option_error(cls: type, *parts) -> FlopcountError:
    """A ``cls`` error whose message is ``parts`` (text and :class:`Option`\\ s) joined; the
    parts stay on the error (``exc.parts``) so another caller can spell them its way."""
    exc = cls("".join(str(p) for p in parts))
    exc.parts = parts
    return exc


def spelled(exc: BaseException, spell: Callable[[Option], str]) -> str:
    """The message of ``exc`` with its options written by ``spell`` (``str(exc)`` when it names none)."""
    parts = getattr(exc, "parts", None)
    if parts is None:
        return str(exc)
    return "".join(spell(p) if isinstance(p, Option) else str(p) for p in parts)


__all__ = ["Option", "option_error", "spelled", "python_spelling", "shown"]
