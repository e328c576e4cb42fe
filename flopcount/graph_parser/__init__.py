"""The graph view: any Graph (traced, loaded natively, or imported from ONNX), node by node.

| module | job |
| --- | --- |
| ``rows.py`` | a row per node (cost, shapes, params, bytes, intensity), rolled up to scopes |
| ``execution.py`` | per-node latency, backward work per node, measured peak (the executor) |
| ``parser.py`` | ``profile_graph``: trace if needed, count, then run what was asked |
"""

from .parser import graph_of, profile_graph

__all__ = ["profile_graph", "graph_of"]
