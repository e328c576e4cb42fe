"""An ONNX model's initializers as tensors, sorted into what the graph makes of them.

Initializers become named graph parameters, except 0-d tensors and small integer tensors (shape
data: constants) and the running statistics of BatchNormalization and precomputed tables
(buffers). Quantized weights are parameters whatever their type; weights a file stores packed
are imported as the tensor they stand for. Initializers that only served as import-time
constants (a Resize's scales) are dropped with the dead code after the trace.
"""

from __future__ import annotations

from math import prod

import numpy as np

from ..device import CPU, META
from ..errors import ModelFileError, UnsupportedOpError
from ..graph.importing import first_line
from ..nn.parameter import Parameter
from ..tensor import Tensor
from .converters import PACKED_WEIGHTS
from .elem_types import to_dtype
from .model import node_attributes, onnx_package, op_label
from .reading import SHAPE_DATA_MAX, FileWeights
from .tables import precomputed_tables


def _buffer_names(model) -> set:
    """Initializers that are running statistics (BatchNormalization's mean and variance) or
    precomputed tables (rotary caches, masks: ``tables.py``): buffers, not parameters."""
    return {name for node in model.graph.node if node.op_type == "BatchNormalization"
            for name in node.input[3:5] if name} | precomputed_tables(model)


# the inputs of quantization ops that hold a layer's weights in an integer or float8 type
_QUANTIZED_WEIGHT_INPUTS = {"DequantizeLinear": (0,), "MatMulInteger": (1,), "ConvInteger": (1,),
                            "QLinearMatMul": (3,), "QLinearConv": (3,), "com.microsoft.MatMulNBits": (1,),
                            "com.microsoft.MatMulIntegerToFloat": (1,), "com.microsoft.QOrderedMatMul": (2,)}


def _quantized_weight_names(model) -> set:
    """Initializers that are quantized weights: parameters of the model whatever their type
    (a QDQ file's int8 conv weights count as its parameters, at one byte each)."""
    return {node.input[i] for node in model.graph.node for i in _QUANTIZED_WEIGHT_INPUTS.get(op_label(node), ())
            if i < len(node.input) and node.input[i]}


def _packed_weights(model) -> dict:
    """{initializer name: (unpack, the reading node's attributes)} for weights a file stores
    packed (MatMulNBits' two 4-bit numbers per byte): imported as the tensor they stand for."""
    found = {}
    for node in model.graph.node:
        entry = PACKED_WEIGHTS.get(op_label(node))
        if entry is not None and len(node.input) > entry[0] and node.input[entry[0]]:
            found[node.input[entry[0]]] = (entry[1], node_attributes(node, 1))
    return found


def initializer_tensors(model, path: str, weights: FileWeights | None = None, meta: bool = False,
                        mapped: dict | None = None) -> tuple:
    """(constants, parameters): {name: Tensor} and {name: (Tensor, kind)}. Arrays are adopted
    as they come (read-only views of the file's or protobuf's bytes), not copied. With
    ``meta``, an initializer whose raw data is in the file (its size checked) and that is
    larger than shape data becomes a meta tensor: nothing is made for it."""
    buffers, quantized, packed = _buffer_names(model), _quantized_weight_names(model), _packed_weights(model)
    constants, params = {}, {}
    for i, init in enumerate(model.graph.initializer):
        dtype, dims = to_dtype(init.data_type, f"initializer {init.name!r}"), tuple(init.dims)
        in_file = weights is not None and weights.spans[i] is not None
        quantized_weight = init.name in quantized and prod(dims) > 1
        if in_file and meta and (quantized_weight or prod(dims) > SHAPE_DATA_MAX):
            tensor = Tensor._make(None, dims, dtype, META)
        else:
            array = weights.array(i, dtype, dims) if in_file else _array_of(init, dtype, path, mapped)
            tensor = Tensor._make(array, tuple(array.shape), dtype, CPU)
        if quantized_weight:
            if init.name in packed:
                unpack, attrs = packed[init.name]
                try:
                    array, shape, dtype = unpack(tensor.data, dims, attrs)
                except ValueError as exc:
                    raise UnsupportedOpError(f"initializer {init.name!r}: {exc}") from None
                tensor = Tensor._make(array, shape, dtype, META if array is None else CPU)
            params[init.name] = (Parameter(tensor), "param")
        elif not tensor.shape or (not dtype.is_floating_point and prod(tensor.shape) <= SHAPE_DATA_MAX):
            constants[init.name] = tensor
        elif init.name in buffers or not dtype.is_floating_point:
            params[init.name] = (tensor, "buffer")
        else:
            params[init.name] = (Parameter(tensor), "param")
    return constants, params


def _array_of(init, dtype, path: str, mapped: dict | None = None) -> np.ndarray:
    """An initializer's values: mapped from its external file, or read by onnx (typed data
    fields, external data loaded)."""
    if mapped and init.name in mapped:
        return mapped[init.name]
    try:
        array = onnx_package().numpy_helper.to_array(init)
    except Exception as exc:
        raise ModelFileError(f"{path or 'model'}: initializer {init.name!r} cannot be read: "
                             f"{first_line(exc)}") from None
    return np.asarray(array, dtype=dtype.np)
