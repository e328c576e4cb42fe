"""Values the rows of a report share instead of each holding its own copy.

A huge graph has two rows per node (its scope and the node itself): a million-node file made
four million shape lists and two million empty dicts. Rows now hold shapes as tuples, one per
distinct value in a report (:class:`ShapeTable`), and a row without MACs holds the one
read-only empty mapping :data:`NO_MACS` until MACs are added to it.
"""

from __future__ import annotations


class _NoMacs(dict):
    """An empty ``macs_by_dtype`` that refuses writes: it is every MAC-less row's at once."""

    __slots__ = ()

    def _refuse(self, *args, **kwargs):
        raise TypeError("this macs_by_dtype is shared by every row without MACs and cannot change; "
                        "add MACs with flopcount.report.sums.add_macs_to(row, dtype, macs)")

    __setitem__ = __delitem__ = __ior__ = _refuse
    clear = pop = popitem = setdefault = update = _refuse

    def __reduce__(self):
        return no_macs, ()  # a pickled or deep-copied row gets the shared one back

    def __copy__(self):
        return {}  # copy.copy(row.macs_by_dtype) gives a dict of the caller's own

    def __deepcopy__(self, memo):
        return self


NO_MACS = _NoMacs()


def no_macs() -> dict:
    """The shared empty ``macs_by_dtype`` (a Row's default)."""
    return NO_MACS


def has_own_macs(by_dtype: dict) -> bool:
    """Whether ``by_dtype`` may be written to (it is not the shared empty one)."""
    return by_dtype is not NO_MACS


class ShapeTable:
    """One tuple per distinct shape and per distinct list of shapes, for the rows of one report.

    >>> table = ShapeTable()
    >>> a, b = table.shapes([(1, 16)]), table.shapes([[1, 16]])
    >>> a, a is b
    (((1, 16),), True)
    """

    __slots__ = ("_shapes", "_lists")

    def __init__(self) -> None:
        self._shapes: dict = {}
        self._lists: dict = {}

    def shape(self, shape) -> tuple | None:
        """``shape`` as the table's tuple (None stays None: an absent optional input)."""
        if shape is None:
            return None
        key = tuple(shape)
        return self._shapes.setdefault(key, key)

    def shapes(self, shapes) -> tuple:
        """A tuple of the table's shape tuples, itself shared by every equal list of shapes."""
        key = tuple(self.shape(s) for s in shapes)
        return self._lists.setdefault(key, key)
