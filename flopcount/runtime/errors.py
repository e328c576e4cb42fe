"""The exception hierarchy every part of flopcount raises.

It lives in the runtime (the bottom layer) so that every layer above can raise and catch it;
the package top level re-exports it as ``flopcount.FlopcountError`` and friends.
"""


class FlopcountError(Exception):
    """Base class: a problem flopcount can explain in one line (bad input, bad file, bad shape)."""


class ShapeError(FlopcountError, ValueError):
    """Shapes, dtypes or devices that an op or a model cannot take; the message quotes them."""


class MemoryLimitError(ShapeError):
    """Work predicted not to fit in the memory a device has left, refused before it runs; the
    message gives the predicted figure and the room there is (``host_memory.check_fits``)."""


class ModelFileError(FlopcountError):
    """A model file that is missing, truncated, corrupted or not of the expected format."""


class UnsupportedOpError(FlopcountError):
    """An op (ONNX op type or runtime op) that flopcount has no rule for."""


class DeviceError(FlopcountError, RuntimeError):
    """A device that is not available (CUDA without CuPy or a GPU) or tensors on mixed devices."""


def add_context(exc: BaseException, where: str) -> None:
    """Say where ``exc`` happened, once: the innermost place that knows (a graph node, as
    torch.fx's interpreter says "While executing %node"; else the running module's path). A
    FlopcountError, whose one line is what the user reads, gets it appended to its message;
    any other exception (a bug in a model's code, say) gets it as a note under its traceback.

    >>> exc = ShapeError("linear: shapes (2, 5) and (4, 8) do not match")
    >>> add_context(exc, "in module '2' (Linear) of Sequential")
    >>> str(exc)
    "linear: shapes (2, 5) and (4, 8) do not match (in module '2' (Linear) of Sequential)"
    """
    if getattr(exc, "_flopcount_where", False):
        return
    try:
        exc._flopcount_where = True
    except AttributeError:  # an exception type that takes no attributes: leave it as it is
        return
    if isinstance(exc, FlopcountError) and len(exc.args) == 1 and isinstance(exc.args[0], str):
        exc.args = (f"{exc.args[0]} ({where})",)
        if hasattr(exc, "parts"):  # a message naming options (flopcount/options.py) keeps its parts
            exc.parts = tuple(exc.parts) + (f" ({where})",)
    else:
        exc.add_note(where)
