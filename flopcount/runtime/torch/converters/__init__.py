"""The table ``ATen op -> converter`` (``CONVERTERS``); importing this package fills it."""

from . import flopcount_ops, math, nn, reduce, select, tensor  # noqa: F401  (each registers its converters)
from ._base import CONVERTERS, NodeContext, converter, packet_name

__all__ = ["CONVERTERS", "NodeContext", "converter", "packet_name"]
