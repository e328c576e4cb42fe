"""The table ``runtime op -> emitter`` that export uses, and the helpers emitters share.

An emitter is ``fn(b, node, ins, outs)``: ``b`` is the exporter's Builder, ``node`` the graph
node (its attrs and the shapes/dtypes of its values), ``ins`` the ONNX names of its inputs
(None for an absent optional one) and ``outs`` the names it must write. Most ops are one ONNX
node; ops ONNX lacks (silu, rms_norm, scaled dot-product attention before opset 23...) are
written as the short chain of ONNX ops that computes them. Where the runtime promotes dtypes
(int64 + float32) and ONNX does not, a Cast comes first.
"""

from __future__ import annotations

from functools import lru_cache, reduce
from typing import Callable

import numpy as np

from ... import dtypes as _dt
from ...errors import UnsupportedOpError
from ...registry import get_op, registrar

EMITTERS: dict[str, Callable] = {}
INT64_MIN = np.iinfo(np.int64).min


# ``@emitter("relu", ...)``: the emitter of each runtime op named
emitter = registrar(EMITTERS, "op", "an emitter")


def unsupported(node, detail: str) -> UnsupportedOpError:
    return UnsupportedOpError(f"export: {node.op_name} node %{node.name} ({node.scope or 'top level'}): {detail}")


def cast_input(b, node, ins, i: int, dtype) -> str:
    """Input ``i`` cast to ``dtype``."""
    return b.cast(ins[i], node.inputs[i].dtype, dtype)


def emitter_for(op_name: str) -> Callable | None:
    """The emitter of runtime op ``op_name``: its own in ``EMITTERS``, else ``direct`` when the op
    names the ONNX operator that computes it (``Op.onnx``), else None (export refuses it)."""
    fn = EMITTERS.get(op_name)
    if fn is None and get_op(op_name).onnx is not None:
        return direct
    return fn


def direct(b, node, ins, outs):
    """The op's ONNX operator (``Op.onnx``) as one node, its inputs cast to the output dtype as
    the runtime promotes them (int + float is float, exp(int) is float), or to their promoted
    dtype when the output is bool (a comparison, IsNaN). Refused at an opset before the operator."""
    op_type = get_op(node.op_name).onnx
    needs_opset(b, node, op_type, _first_opset(op_type))
    dtype = node.outputs[0].dtype
    if dtype is _dt.bool_:
        dtype = reduce(_dt.promote, (v.dtype for v in node.inputs))
    b.add(op_type, [cast_input(b, node, ins, i, dtype) for i in range(len(ins))], outs)


def needs_opset(b, node, op_type: str, opset: int) -> None:
    if b.opset < opset:
        raise unsupported(node, f"ONNX {op_type} needs opset {opset} or later (exporting at opset {b.opset})")


@lru_cache(maxsize=None)
def _first_opset(op_type: str) -> int:
    from onnx import defs

    return min(s.since_version for s in defs.get_all_schemas_with_history() if s.name == op_type and s.domain == "")


def _axes_input_or_attr(b, axes, since: int = 18) -> dict:
    """How a reduction takes ``axes``: an input from opset ``since``, an attribute before."""
    if b.opset >= since:
        return {"input": b.ints(axes)}
    return {"attr": list(axes)}


def reduce_node(b, op_type: str, x: str, axes, keepdims: bool, outputs=None, since: int = 18):
    how = _axes_input_or_attr(b, axes, since)
    inputs = [x] + ([how["input"]] if "input" in how else [])
    return b.add(op_type, inputs, outputs, keepdims=int(keepdims), axes=how.get("attr"))


def onnx_type(dtype) -> int:
    """The ONNX element type code of a runtime dtype."""
    from ..elem_types import from_dtype

    return from_dtype(dtype)
