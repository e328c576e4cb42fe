"""Emitters of reductions (sum, mean, amax, all/any, argmax, cumsum)."""

from __future__ import annotations

import numpy as np

from ... import dtypes as _dt
from ._base import cast_input, emitter, onnx_type, reduce_node


# --- reductions --------------------------------------------------------------------------------

@emitter("sum")
def sum_(b, node, ins, outs):
    x = cast_input(b, node, ins, 0, node.outputs[0].dtype)  # integer sums are int64, as the runtime's
    reduce_node(b, "ReduceSum", x, node.attrs["dims"], node.attrs["keepdim"], outs, since=13)


_REDUCE = {"mean": "ReduceMean", "amax": "ReduceMax", "amin": "ReduceMin", "prod": "ReduceProd"}


@emitter(*_REDUCE)
def reduce_(b, node, ins, outs):
    reduce_node(b, _REDUCE[node.op_name], ins[0], node.attrs["dims"], node.attrs["keepdim"], outs)


@emitter("all", "any")
def all_any(b, node, ins, outs):
    x = cast_input(b, node, ins, 0, _dt.int64)  # ONNX reductions take no bool before opset 20
    y = reduce_node(b, "ReduceMin" if node.op_name == "all" else "ReduceMax", x, node.attrs["dims"],
                    node.attrs["keepdim"])
    b.add("Cast", [y], outs, to=onnx_type(_dt.bool_))


@emitter("argmax", "argmin")
def arg_extreme(b, node, ins, outs):
    op_type = "ArgMax" if node.op_name == "argmax" else "ArgMin"
    dim, keep = node.attrs["dim"], node.attrs["keepdim"]
    if dim is not None:
        b.add(op_type, ins, outs, axis=dim, keepdims=int(keep))
        return
    flat = b.add("Reshape", [ins[0], b.ints([-1])])
    y = b.add(op_type, [flat], axis=0, keepdims=0)
    b.add("Reshape", [y, b.ints(node.outputs[0].shape)], outs)


@emitter("cumsum")
def cumsum(b, node, ins, outs):
    x = cast_input(b, node, ins, 0, node.outputs[0].dtype)
    b.add("CumSum", [x, b.const(np.array(node.attrs["dim"], np.int64), "axis")], outs)
