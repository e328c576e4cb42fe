"""Nested inputs and outputs (tensors inside tuples, lists and dicts) as a flat list of leaves
plus a JSON-friendly description of the nesting, so a graph can rebuild them after a run and a
file can store them.

A tree is an int (the index of a tensor leaf), ``{"tuple": [...]}``, ``{"list": [...]}``,
``{"dict": [[key, tree], ...]}`` or ``{"value": v}`` for a plain Python value kept as is.
"""

from __future__ import annotations

import inspect

from ..errors import FlopcountError
from ..tensor import Tensor

_LITERALS = (type(None), bool, int, float, str)


class UnsupportedValueError(FlopcountError, TypeError):
    """A model's input or output holds something neither view can follow: a generator (a
    forward that yields has run nothing when it returns), an object of the model's own class."""


def flatten(obj, leaves: list | None = None, what: str = "value") -> tuple[list, object]:
    """(tensor leaves in order, tree). Non-tensor leaves must be plain Python values."""
    leaves = [] if leaves is None else leaves
    if isinstance(obj, Tensor):
        leaves.append(obj)
        return leaves, len(leaves) - 1
    if isinstance(obj, tuple):
        return leaves, {"tuple": [flatten(o, leaves, what)[1] for o in obj]}
    if isinstance(obj, list):
        return leaves, {"list": [flatten(o, leaves, what)[1] for o in obj]}
    if isinstance(obj, dict):
        return leaves, {"dict": [[k, flatten(v, leaves, what)[1]] for k, v in obj.items()]}
    if isinstance(obj, _LITERALS):
        return leaves, {"value": obj}
    why = " (a forward that yields returns before running anything)" if inspect.isgenerator(obj) else ""
    raise UnsupportedValueError(f"the model's {what} is or holds a {type(obj).__name__}{why}, which flopcount "
                                f"cannot follow; use tensors, tuples, lists, dicts and plain Python values "
                                f"(None, bool, int, float, str)")


def unflatten(tree, leaves: list):
    """The nested object ``tree`` describes, with its leaves taken from ``leaves``."""
    if isinstance(tree, int):
        return leaves[tree]
    if "tuple" in tree:
        return tuple(unflatten(t, leaves) for t in tree["tuple"])
    if "list" in tree:
        return [unflatten(t, leaves) for t in tree["list"]]
    if "dict" in tree:
        return {k: unflatten(t, leaves) for k, t in tree["dict"]}
    return tree["value"]


def tensor_leaves(obj) -> list:
    """Only the tensors inside ``obj``, in the order ``flatten`` gives them."""
    return leaves_of(obj, Tensor)


def leaves_of(obj, kind: type) -> list:
    """The values of type ``kind`` inside ``obj`` (nested in tuples, lists and dict values), in order.

    >>> leaves_of([1, ("a", {"k": 2})], int)
    [1, 2]
    """
    if isinstance(obj, kind):
        return [obj]
    if isinstance(obj, (tuple, list)):
        return [t for o in obj for t in leaves_of(o, kind)]
    if isinstance(obj, dict):
        return [t for v in obj.values() for t in leaves_of(v, kind)]
    return []
