"""The table ``ONNX op type -> converter`` (``CONVERTERS``), filled by the family modules."""

from ._base import CONVERTERS, NodeContext, converter, is_const
# each family module registers its converters
from . import (attention, control_flow, detection, loss, math, nn, reduce, resize, rnn, selection,  # noqa: F401
               spatial, tensor)

__all__ = ["CONVERTERS", "NodeContext", "converter", "is_const"]
