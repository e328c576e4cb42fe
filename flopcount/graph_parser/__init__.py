"""The graph view: any Graph (traced, loaded natively, or imported from ONNX), node by node; its
rows are made by ``recording/rows.py``, as the eager view's are.

| module | job |
| --- | --- |
| ``execution.py`` | per-node latency, backward work per node, measured peak (the executor) |
| ``parser.py`` | ``profile_graph``: trace if needed, count, then run what was asked |
"""

from .parser import graph_of, profile_graph

__all__ = ["profile_graph", "graph_of"]
