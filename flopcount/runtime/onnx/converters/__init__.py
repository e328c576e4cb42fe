"""The table ``ONNX op type -> converter`` (``CONVERTERS``), filled by the family modules."""

from ._base import CONVERTERS, NodeContext, converter, is_const
from . import attention, control_flow, loss, math, nn, reduce, resize, selection, tensor  # noqa: F401  (each registers its converters)

__all__ = ["CONVERTERS", "NodeContext", "converter", "is_const"]
