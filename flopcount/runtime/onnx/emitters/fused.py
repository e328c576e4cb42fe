"""The emitter of ``fused_elementwise``: each step through its own op's emitter."""

from __future__ import annotations

from ...graph.ir import Value
from ._base import emitter, emitter_for, unsupported


# --- fused chains ------------------------------------------------------------------------------

class _Step:
    """A step of a fused chain, shaped like a graph node for the emitters."""

    def __init__(self, op_name, inputs, outputs, attrs, scope):
        self.op_name, self.inputs, self.outputs, self.attrs, self.scope = op_name, inputs, outputs, attrs, scope
        self.name = outputs[0].name


@emitter("fused_elementwise")
def fused(b, node, ins, outs):
    from ...graph.fused import _step_specs

    steps = node.attrs["steps"]
    specs = _step_specs([v.spec for v in node.inputs], steps)
    names, values = [], []
    for k, ((op_name, args, attrs), spec) in enumerate(zip(steps, specs)):
        last = k == len(steps) - 1
        out = Value(outs[0] if last else b.fresh(op_name), spec.shape, spec.dtype, "node")
        step_ins = [node.inputs[a] if a >= 0 else values[-1 - a] for a in args]
        step_names = [ins[a] if a >= 0 else names[-1 - a] for a in args]
        emit = emitter_for(op_name)
        if emit is None:
            raise unsupported(node, f"fused step {op_name!r} has no emitter")
        emit(b, _Step(op_name, step_ins, [out], dict(attrs), node.scope), step_names, [out.name])
        names.append(out.name)
        values.append(out)
