"""The table ``ONNX op type -> converter`` (``CONVERTERS``), filled by the family modules."""

from ._base import CONVERTERS, NodeContext, converter, is_const
from . import math, nn, quantize, reduce, resize, tensor  # noqa: F401  (each registers its converters)

__all__ = ["CONVERTERS", "NodeContext", "converter", "is_const"]
