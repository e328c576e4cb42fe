"""Graph mode: ``trace`` records a model into a ``Graph`` (the IR), which prints, runs through
the dispatcher, goes through passes, and saves to a native file; ``Graph(module)`` and
``set_mode("graph")`` compile lazily on first call.
"""

from .ir import Graph, Node, Value
from .trace import TraceError, trace
from .lazy import LazyGraph, get_mode, set_mode
from .fused import FusedElementwise, fused_elementwise
from . import passes

__all__ = ["Graph", "Node", "Value", "trace", "TraceError", "LazyGraph", "set_mode", "get_mode",
           "FusedElementwise", "fused_elementwise", "passes"]
