"""The table ``ONNX op type -> converter`` (``CONVERTERS``), filled by the family modules."""

from ._base import CONVERTERS, NodeContext, converter, is_const
# each family module registers its converters
from . import (attention, control_flow, detection, loss, math, nn, recurrent_state, reduce, resize,  # noqa: F401
               quantized, rnn, selection, signal, spatial, tensor, training)

__all__ = ["CONVERTERS", "NodeContext", "converter", "is_const"]
