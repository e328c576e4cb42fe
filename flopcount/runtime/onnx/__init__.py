"""ONNX import and export (the ``onnx`` package reads and writes the files).

    g = rt.onnx.load("bert.onnx", input_shapes={"input_ids": (1, 128)})   # -> Graph
    rt.onnx.export(model, "model.onnx", rt.randn(1, 3, 224, 224))         # Module or Graph

Import converts each ONNX node with a table ``op type -> converter`` (``converters/``) under the
graph tracer; export maps each runtime op of a traced graph with a table ``op -> emitter``
(``emitters.py``). ``supported_ops()`` lists the ONNX op types import understands.
"""

from __future__ import annotations

from .converters import CONVERTERS
from .exporter import export
from .importer import load


def supported_ops() -> list[str]:
    """The ONNX op types (default domain) that ``load`` converts."""
    return sorted(CONVERTERS)


__all__ = ["load", "export", "supported_ops"]
