"""Graph mode: ``trace`` records a model into a ``Graph`` (the IR, plain data), which prints,
goes through passes and saves to a native file; a ``GraphModule`` runs it through the
dispatcher; ``compile(module)`` and ``set_mode("graph")`` compile lazily on first call.
"""

from .ir import Graph, Node, Value
from .trace import TraceError, trace
from .executor import GraphModule
from .lazy import LazyGraph, compile, get_mode, set_mode
from .fused import FusedElementwise, fused_elementwise
from . import passes

__all__ = ["Graph", "Node", "Value", "trace", "TraceError", "GraphModule", "LazyGraph", "compile", "set_mode",
           "get_mode", "FusedElementwise", "fused_elementwise", "passes"]
