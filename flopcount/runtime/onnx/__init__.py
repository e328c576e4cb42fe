"""ONNX import and export (the ``onnx`` package reads and writes the files).

    g = rt.onnx.load("bert.onnx", input_shapes={"input_ids": (1, 128)})   # -> Graph
    rt.onnx.export(model, "model.onnx", rt.randn(1, 3, 224, 224))         # Module or Graph

Import converts each ONNX node with a table ``op type -> converter`` (``converters/``) under the
graph tracer; export maps each runtime op of a traced graph with a table ``op -> emitter``
(``emitters/``). ``supported_ops()`` lists the ONNX op types import understands;
``inputs(path)`` reads the inputs a file declares (symbolic dims included) without importing it.
"""

from __future__ import annotations

import os
from typing import NamedTuple

from ..dtypes import DType
from ..errors import UnsupportedOpError
from .converters import CONVERTERS
from .elem_types import to_dtype
from .exporter import export
from .importer import load


class OnnxInput(NamedTuple):
    """A graph input as an ONNX file declares it: each dim an int, a symbolic name
    (``"batch"``) or None when unknown; ``dims`` is None when not even the rank is declared;
    ``dtype`` is None for an element type the runtime has no dtype for."""

    name: str
    dims: list | None
    dtype: DType | None


def supported_ops() -> list[str]:
    """The ONNX op types (default domain) that ``load`` converts."""
    return sorted(CONVERTERS)


def inputs(path) -> list[OnnxInput]:
    """The inputs an ONNX file (or ``onnx.ModelProto``) declares, initializers excluded, as
    written in the file. Only the protobuf is read: no weights, no conversion, so it works
    before the symbolic dims are known (to say which shapes ``load`` needs).

    >>> rt.onnx.inputs("bert.onnx")   # doctest: +SKIP
    [OnnxInput(name='input_ids', dims=['batch', 'sequence'], dtype=int64)]
    """
    from .model import declared_inputs, onnx_package
    from .reading import read_model

    model = path if isinstance(path, onnx_package().ModelProto) else read_model(os.fspath(path))
    out = []
    for name, dims, code in declared_inputs(model, {t.name for t in model.graph.initializer}):
        try:
            dtype = to_dtype(code, f"graph input {name!r}")
        except UnsupportedOpError:
            dtype = None
        out.append(OnnxInput(name, dims, dtype))
    return out


__all__ = ["load", "export", "inputs", "supported_ops", "OnnxInput"]
