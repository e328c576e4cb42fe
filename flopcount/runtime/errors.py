"""The exception hierarchy every part of flopcount raises.

It lives in the runtime (the bottom layer) so that every layer above can raise and catch it;
the package top level re-exports it as ``flopcount.FlopcountError`` and friends.
"""


class FlopcountError(Exception):
    """Base class: a problem flopcount can explain in one line (bad input, bad file, bad shape)."""


class ShapeError(FlopcountError, ValueError):
    """Shapes, dtypes or devices that an op or a model cannot take; the message quotes them."""


class ModelFileError(FlopcountError):
    """A model file that is missing, truncated, corrupted or not of the expected format."""


class UnsupportedOpError(FlopcountError):
    """An op (ONNX op type or runtime op) that flopcount has no rule for."""


class DeviceError(FlopcountError, RuntimeError):
    """A device that is not available (CUDA without CuPy or a GPU) or tensors on mixed devices."""
