"""Optional packages (onnx, torch, jax, tflite, gguf...), imported when a model of their kind
comes in, never by ``import flopcount``.

    >>> require("math", "never shown").sqrt(4.0)
    2.0
"""

from __future__ import annotations

import importlib

from .errors import FlopcountError


def require(name: str, missing: str, error: type = FlopcountError):
    """The module ``name``; when it cannot be imported, ``error(missing)``: one line saying what
    needs it and how to install it."""
    try:
        return importlib.import_module(name)
    except ImportError:
        raise error(missing) from None


__all__ = ["require"]
