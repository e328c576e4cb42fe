"""The table ``ONNX op type -> converter`` (``CONVERTERS``), filled by the family modules."""

from ._base import CONVERTERS, PACKED_WEIGHTS, NodeContext, converter, is_const
# each family module registers its converters
from . import (attention, control_flow, detection, loss, math, microsoft, nn, recurrent_state, reduce,  # noqa: F401
               resize, quantized, rnn, selection, signal, spatial, tensor, training)

__all__ = ["CONVERTERS", "PACKED_WEIGHTS", "NodeContext", "converter", "is_const"]
