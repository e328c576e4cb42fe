"""TensorFlow Lite / LiteRT import (the ``tflite`` package reads the flatbuffer; nothing runs).

    g = rt.tflite.load("mobilenet_v2.tflite")   # -> Graph, NHWC inputs as the file declares

Each operator of the main subgraph is converted with a table ``builtin op -> converter``
(``converters.py``); int8 quantized ops keep TFLite's integer arithmetic and count their MACs
as int8. ``supported_ops()`` lists the builtin operators import understands.
"""

from __future__ import annotations

from . import math_ops, shape_ops  # noqa: F401  (they register their converters in CONVERTERS)
from .converters import CONVERTERS
from .importer import load
from .reader import IDENTIFIER, is_tflite


def supported_ops() -> list[str]:
    """The TFLite builtin operators that ``load`` converts."""
    return sorted(CONVERTERS)


__all__ = ["IDENTIFIER", "is_tflite", "load", "supported_ops"]
