"""A captured jaxpr (``capture.Captured``) as an ordinary runtime Graph.

The jaxpr's equations are walked in order under the graph tracer: each primitive goes to its
converter (``converters/``), which calls runtime ops that the tracer records in the equation's
scope, so every count, view and report afterwards is the same code path as for the zoo's
models. Calls (``jit``, ``custom_jvp_call``, ``checkpoint``...) and ``scan`` bodies are
converted in place, in the scope of the call plus their own.

* Parameters and buffers keep their variable-tree names and hold the arrays' data.
* Scopes come from each equation's ``source_info.name_stack`` (``Model/Dense_0`` becomes
  ``Dense_0``: the root module's name is dropped, as a module's own path is empty).
* A primitive without a converter becomes an ``opaque`` op with the output shapes JAX states:
  listed as unsupported, counted as zero.
* Every converted value is checked against the shape JAX states for it, so a converter that
  disagrees with JAX fails at import, naming the primitive.
"""

from __future__ import annotations

from collections import Counter

from ..errors import FlopcountError, ShapeError, UnsupportedOpError
from ..graph.ir import Graph
from ..graph.importing import trace_import
from ..nn.parameter import Parameter
from ..ops.elementwise import cast
from ..ops.opaque import opaque
from ..tensor import Tensor, tensor
from .converters import CONVERTERS, EqnContext, constant, dtype_of, spec_of


class _Walk:
    """Runs the jaxpr's equations through their converters (the function the tracer traces)."""

    def __init__(self, captured, params: dict):
        self.captured = captured
        self.params = params          # leaf name -> runtime tensor (parameters, buffers)
        self.unsupported: Counter = Counter()
        self.notes: list = []

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def __call__(self, *inputs):
        closed = self.captured.jaxpr
        given = iter(inputs)
        values = [next(given) if leaf.kind == "input" else self.params[leaf.name] for leaf in self.captured.leaves]
        consts = [self.params.get(f"const_{i}") for i in range(len(closed.consts))]   # None: a plain constant
        outs = self.run_jaxpr(closed.jaxpr, values, "", consts, closed.consts)
        return outs[0] if len(outs) == 1 else tuple(outs)

    # --- one jaxpr ----------------------------------------------------------------------------
    def run_jaxpr(self, jaxpr, inputs: list, prefix: str, consts=None, const_values=()) -> list:
        """Convert ``jaxpr`` (open or closed) on ``inputs`` in scope ``prefix``; its outputs."""
        if hasattr(jaxpr, "consts") and hasattr(jaxpr, "jaxpr"):   # a ClosedJaxpr
            const_values, jaxpr = jaxpr.consts, jaxpr.jaxpr
        env: dict = {}
        if len(inputs) != len(jaxpr.invars):
            raise FlopcountError(f"JAX jaxpr takes {len(jaxpr.invars)} inputs, got {len(inputs)}")
        env.update(zip(jaxpr.invars, inputs))
        for i, (var, value) in enumerate(zip(jaxpr.constvars, const_values)):
            given = consts[i] if consts is not None and i < len(consts) else None
            env[var] = given if given is not None else constant(_numpy(value))
        for eqn in jaxpr.eqns:
            ins = [self._read(v, env) for v in eqn.invars]
            outs = self._convert(eqn, ins, prefix)
            for var, out in zip(eqn.outvars, outs):
                if type(var).__name__ != "DropVar":
                    env[var] = out
        return [self._read(v, env) for v in jaxpr.outvars]

    def _read(self, var, env):
        if type(var).__name__ == "Literal":
            return constant(_numpy(var.val), dtype_of(var.aval.dtype))
        return env[var]

    def _convert(self, eqn, ins: list, prefix: str) -> list:
        stack = self._stack(eqn)
        scope = stack if stack and self.captured.absolute_scopes else _join(prefix, stack)
        ctx = EqnContext(eqn, self, scope)
        convert = CONVERTERS.get(eqn.primitive.name)
        recorded = self.tracer.graph.nodes
        first = len(recorded)
        # a node's module type: its scope's (``ImportTracer.module_types``); an inlined call's
        # nodes keep their own equation as source
        with self.tracer.converting(ctx.where, scope, prefixed="JAX ", source=eqn.primitive.name):
            try:
                result = convert(ctx, *ins) if convert is not None else self._opaque(ctx, ins)
            except UnsupportedOpError as exc:
                # a case the converter does not take (a transposed conv, a general gather):
                # the equation stays in the graph as an opaque op, listed as unsupported
                del recorded[first:]
                self.note(f"{exc}: counted as 0")
                result = self._opaque(ctx, ins)
        outs = list(result) if isinstance(result, (list, tuple)) else [result]
        return [self._checked(ctx, out, var.aval) for out, var in zip(outs, eqn.outvars)]

    def _stack(self, eqn) -> str:
        """The equation's name stack as a dotted scope, without transform markers or the root."""
        stack = str(getattr(eqn.source_info, "name_stack", "") or "")
        parts = [p for p in stack.split("/") if p and "(" not in p]
        if self.captured.absolute_scopes:   # nested full paths: the innermost is the module
            return parts[-1] if parts else ""
        root = self.captured.root_scope
        if root and parts and parts[0] == root:
            parts = parts[1:]
        return ".".join(parts)

    def _opaque(self, ctx, ins: list):
        """A primitive no converter knows: an ``opaque`` op with the shapes JAX states."""
        self.unsupported[ctx.primitive] += 1
        outputs = [(shape, dtype.name) for shape, dtype in map(spec_of, ctx.out_avals)]
        y = opaque(*[t for t in ins if isinstance(t, Tensor)], label=f"JAX {ctx.primitive}",
                   node=ctx.scope or ctx.primitive, outputs=outputs)
        return list(y) if isinstance(y, tuple) else [y]

    def _checked(self, ctx, out, aval):
        shape, want = spec_of(aval)
        if not isinstance(out, Tensor):
            out = constant(out, want)
        if tuple(out.shape) != shape:
            raise ShapeError(f"{ctx.where}: converted to shape {list(out.shape)}, but JAX states {list(shape)}")
        return out if out.dtype is want else cast(out, want)


def _join(prefix: str, scope: str) -> str:
    return ".".join(p for p in (prefix, scope) if p)


def _numpy(value):
    import numpy as np

    return np.asarray(value)


def _parameters(captured) -> dict:
    """{leaf name: (runtime tensor, kind)} of the model's parameters, buffers and captured
    constant arrays (a closure's weights), which become parameters named ``const_i``."""
    params = {}
    for leaf in captured.leaves:
        if leaf.kind != "input":
            t = tensor(leaf.array, dtype=dtype_of(leaf.array.dtype), device="cpu")
            params[leaf.name] = (Parameter(t) if leaf.kind == "param" and t.dtype.is_floating_point else t,
                                 leaf.kind if leaf.kind == "buffer" or t.dtype.is_floating_point else "buffer")
    for i, value in enumerate(captured.jaxpr.consts):
        array = _numpy(value)
        if array.ndim > 0 and array.dtype.kind == "f":
            params[f"const_{i}"] = (Parameter(tensor(array, dtype=dtype_of(array.dtype), device="cpu")), "param")
    return params


def convert(captured, name: str | None = None) -> Graph:
    """The Graph of a captured jaxpr; ``graph.notes`` names the primitives without a converter
    and what the converters noted (loops not counted, the branch of a ``cond`` counted)."""
    params = _parameters(captured)
    walk = _Walk(captured, {k: t for k, (t, _) in params.items()})
    inputs = [leaf for leaf in captured.leaves if leaf.kind == "input"]
    avals = [v.aval for v, leaf in zip(captured.jaxpr.jaxpr.invars, captured.leaves) if leaf.kind == "input"]
    graph = trace_import(walk, [leaf.name for leaf in inputs], params, list(map(spec_of, avals)), captured.module_types)
    graph.name = name or captured.name
    graph.module_types = {scope: kind for scope, kind in captured.module_types.items()}
    notes = list(walk.notes)
    if walk.unsupported:
        listed = ", ".join(f"{op} ({n} call{'s' if n != 1 else ''})" for op, n in sorted(walk.unsupported.items()))
        notes.append(f"no flopcount mapping for JAX primitive(s) {listed}: counted as 0")
    graph.notes = notes
    return graph


__all__ = ["convert"]
