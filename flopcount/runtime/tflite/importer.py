"""``load(path) -> Graph``: a TFLite file's main subgraph as an ordinary runtime Graph.

1. ``reader.py`` reads the flatbuffer into records (a bad file is one ModelFileError);
2. the constant tensors become graph parameters (conv and fully connected filters and biases,
   float weights: read-only views of the file's bytes; meta tensors on the meta device) or
   constants (shapes, axes, paddings);
3. each operator runs its converter (``converters.py``) under the graph tracer, recorded in a
   module scope made from its output tensor's name. An operator no converter knows becomes an
   ``opaque`` op with the output shape the file declares, counted as zero and listed as
   unsupported. The graph's inputs and outputs keep the layout the file declares (NHWC).
"""

from __future__ import annotations

import math
import os

from ..device import CPU, META
from ..device import device as parse_device
from ..dtypes import get_dtype
from ..errors import ModelFileError, UnsupportedOpError
from ..graph.importing import node_inputs, trace_import, walk_result
from ..graph.ir import Graph
from ..graph.passes.dce import dce
from ..nn.parameter import Parameter
from ..onnx.converters.quantized import narrow_dtype
from ..ops.opaque import opaque
from ..tensor import Tensor
from . import reader
from .converters import CONVERTERS, WEIGHTED, OpContext
from .quantized import is_quantized


def load(path, device=None) -> Graph:
    """Import the TFLite file at ``path`` as a Graph (NHWC inputs and outputs, as declared).
    ``device="meta"`` makes no arrays for the weights (shapes only).

    >>> g = rt.tflite.load("mobilenet_v2.tflite")   # doctest: +SKIP
    >>> g.cost().macs                                # doctest: +SKIP
    300774272
    """
    meta = device is not None and parse_device(device).type == "meta"
    model = reader.read(os.fspath(path), meta)
    graph = import_model(model)
    graph.name = model.name
    graph.notes = list(model.notes) + graph.notes
    return graph.to("meta") if meta else graph


def _weight_indices(model) -> set:
    """The tensors that are layers' weights (filters and biases): parameters whatever their type."""
    return {i for op in model.operators if op.op in WEIGHTED or op.op == "TRANSPOSE_CONV"
            for i in op.inputs[1:3] if i >= 0}


def _constants(model) -> tuple:
    """({tensor index: constant Tensor}, {name: (Tensor, kind)}) for the file's constant tensors."""
    weights = _weight_indices(model)
    constants, params, names = {}, {}, set()
    for i, record in enumerate(model.tensors):
        if not record.constant or record.unsupported:
            continue
        dtype = get_dtype(record.dtype)
        if record.data is None:
            tensor = Tensor._make(None, record.shape, dtype, META)
        else:
            tensor = Tensor._make(record.data, record.shape, dtype, CPU)
        if i in weights or (dtype.is_floating_point and math.prod(record.shape) > 1):
            name = _unique(record.name, names)
            params[name] = (Parameter(tensor), "param")
            constants[i] = params[name][0]
        elif record.data is None:
            name = _unique(record.name, names)
            params[name] = (tensor, "buffer")
            constants[i] = tensor
        else:
            constants[i] = tensor
    return constants, params


def _unique(name: str, taken: set) -> str:
    base, k = name, 1
    while name in taken:
        k += 1
        name = f"{base}_{k}"
    taken.add(name)
    return name


def _scope(record, model) -> str:
    """A module scope from the op's first output tensor's name (``model/conv2d/Relu;...``: the
    path without the op's own last component, ``model.conv2d``)."""
    name = model.tensors[record.outputs[0]].name.split(";")[0] if record.outputs else ""
    parts = [p for p in name.split("/") if p]
    if len(parts) > 1:
        parts = parts[:-1]
    return ".".join(parts) or f"{record.op.lower()}_{record.index}"


def import_model(model):
    """A Graph from a read TFLite model (``reader.TfliteModel``)."""
    constants, params = _constants(model)
    inputs = [model.tensors[i] for i in model.inputs]
    odd = next((r for r in inputs if r.unsupported), None)
    if odd is not None:
        raise UnsupportedOpError(f"graph input {odd.name!r} has type {odd.unsupported}, which flopcount does not support")
    conversion = _Conversion(model, constants)
    graph = trace_import(conversion, [r.name for r in inputs], params, [(r.shape, get_dtype(r.dtype)) for r in inputs])
    return dce(graph, in_place=True)


class _Conversion:
    """Runs the operators through their converters (the function the tracer traces)."""

    def __init__(self, model, constants: dict):
        self.model = model
        self.constants = constants
        self.tracer = None

    def __call__(self, *inputs):
        values = dict(self.constants)
        values.update(zip(self.model.inputs, inputs))
        for record in self.model.operators:
            self._convert(record, values)
        return walk_result(self.model.outputs, values, lambda i: ModelFileError(
            f"graph output {self.model.tensors[i].name!r} is not computed by any operator"))

    def _convert(self, record, values: dict) -> None:
        ctx = OpContext(record, self.model.tensors)
        odd = next((r for r in ctx.ins + ctx.outs if r is not None and r.unsupported), None)
        if odd is not None:
            raise UnsupportedOpError(f"{ctx.where}: tensor {odd.name!r} has type {odd.unsupported}, which flopcount "
                                     f"does not support")
        args = node_inputs([i if i >= 0 else None for i in record.inputs], values, lambda i: ModelFileError(
            f"{ctx.where} reads tensor {self.model.tensors[i].name!r}, which no input, constant or earlier "
            f"operator defines"))
        convert = CONVERTERS.get(record.op) or self._opaque(ctx)
        mac = None
        if record.op in WEIGHTED and len(ctx.ins) > 1 and is_quantized(ctx.ins[1]):
            # an int8 input, or a float one quantized to int8 per row (a hybrid layer)
            mac = narrow_dtype([get_dtype(r.dtype) if is_quantized(r) else get_dtype("int8") for r in ctx.ins[:2]])
        with self.tracer.converting(ctx.where, _scope(record, self.model), keep=(UnsupportedOpError,),
                                    invalid="options", module_type=f"TFLite {record.op}",
                                    source=ctx.out.name if ctx.outs else ctx.where, mac_dtype=mac):
            result = convert(ctx, *args)
        results = result if isinstance(result, (tuple, list)) else (result,)
        for i, t in zip(record.outputs, results):
            declared = self.model.tensors[i].shape
            if tuple(t.shape) != tuple(declared):
                raise ModelFileError(f"{ctx.where}: computes shape {tuple(t.shape)}, the file declares {declared}")
            values[i] = t

    def _opaque(self, ctx):
        label = f"TFLite {ctx.op}"

        def convert(ctx, *inputs):
            outputs = [(r.shape, r.dtype) for r in ctx.outs]
            return opaque(*[x for x in inputs if x is not None], label=label, node=ctx.where, outputs=outputs)

        return convert
