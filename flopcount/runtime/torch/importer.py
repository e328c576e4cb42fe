"""A captured ATen graph (``capture.Captured``) as an ordinary runtime Graph.

The FX graph is walked node by node under the graph tracer: each ATen call goes to its
converter (``converters/``), which calls runtime ops that the tracer records in the node's
module scope, so every count, view and report afterwards is the same code path as for the
zoo's models. Only the nodes the model's outputs need are converted (buffer updates that
torch.export returns as extra outputs are left out, as a forward graph has none).

* Parameters and buffers keep their state-dict names (``layer1.0.conv1.weight``); their data is
  the torch tensor's memory (CPU), or none (a model on torch's meta device).
* Scopes and module types come from each node's ``nn_module_stack``: the innermost module's
  path is the scope (``layer1.0.conv1``) and its class the node's module type (``Conv2d``); the
  classes of every enclosing module go to ``Graph.module_types``.
* An ATen op without a converter becomes a fallback op named after it (``fallback.py``):
  recorded shapes, no cost rule (listed as unsupported, counted as zero), run by torch.
* Complex values (a rotary embedding written with ``torch.polar``) are first lowered to real
  tensors with a trailing (real, imaginary) dim (``complex.py``).
* Every converted value is checked against the shape torch recorded for it, so a converter
  that disagrees with ATen fails at import, naming the node.
"""

from __future__ import annotations

import operator
from collections import Counter

from ..device import META
from ..errors import ShapeError, UnsupportedOpError
from ..graph.ir import Graph
from ..graph.importing import trace_import
from ..nn.parameter import Parameter
from ..registry import Spec
from ..tensor import Tensor
from .complex import has_complex
from .fx_walk import needed_nodes
from .complex import lower as lower_complex
from .converters import CONVERTERS, NodeContext, packet_name
from .fallback import Slot, fallback_op
from .tensors import from_torch, to_dtype


def spec_of(val):
    """The Spec(s) of an FX node's recorded value (a FakeTensor, or a list/tuple of them)."""
    if isinstance(val, (list, tuple)):
        return tuple(spec_of(v) for v in val)
    if hasattr(val, "shape") and hasattr(val, "dtype"):
        return Spec(tuple(int(d) for d in val.shape), to_dtype(val.dtype, "a value"), META)
    return None


def scope_of(node) -> tuple[str, str]:
    """(dotted module path, class name) of the innermost module an FX node ran in."""
    stack = node.meta.get("nn_module_stack") or {}
    if not stack:
        return "", ""
    path, kind = list(stack.values())[-1]
    return module_path(path), class_name(kind)


def module_path(path: str) -> str:
    """Normalize the spellings torch versions use: ``L['self'].layer1[0]`` -> ``layer1.0``."""
    path = path.replace("L['self'].", "").replace("L['self']", "").replace("L__self___", "")
    path = path.replace("['", ".").replace("']", "").replace("[", ".").replace("]", "")
    return path.strip(".")


def class_name(kind) -> str:
    name = kind if isinstance(kind, str) else getattr(kind, "__qualname__", str(kind))
    return name.rpartition(".")[2]


class _Walk:
    """Runs the FX nodes through their converters (the function the tracer traces)."""

    def __init__(self, captured, placeholders: dict):
        self.captured = captured
        self.placeholders = placeholders   # placeholder name -> runtime tensor (params, constants)
        self.tracer = None
        self.fallbacks: Counter = Counter()
        self.needed = needed_nodes(captured.graph, captured.outputs)

    def __call__(self, *inputs):
        values = dict(self.placeholders)
        values.update(zip(self.captured.inputs, inputs))
        for node in self.captured.graph.nodes:
            if node.op == "call_function" and node.name in self.needed:
                values[node.name] = self._call(node, values)
            elif node.op == "get_attr" and node.name in self.needed:
                raise UnsupportedOpError(f"node {node.name!r} reads submodule or attribute {node.target!r} "
                                         f"(control flow such as torch.cond is not supported)")
        outs = [self._arg(o, values) for o in self.captured.outputs]
        return outs[0] if len(outs) == 1 else tuple(outs)

    # --- arguments -------------------------------------------------------------------------
    def _arg(self, a, values):
        import torch

        if isinstance(a, torch.fx.Node):
            return values[a.name]
        if isinstance(a, (list, tuple)):
            return type(a)(self._arg(v, values) for v in a)
        if isinstance(a, dict):
            return {k: self._arg(v, values) for k, v in a.items()}
        if isinstance(a, torch.dtype):
            return to_dtype(a, "an argument")
        return a

    # --- one node -----------------------------------------------------------------------------
    def _call(self, node, values):
        target = node.target
        if target is operator.getitem:
            return self._getitem(node, values)
        scope, module_type = scope_of(node)
        name = packet_name(target)
        overload = getattr(target, "_overloadname", "default")
        ctx = NodeContext(str(target), overload, node.name, spec_of(node.meta.get("val")))
        args, kwargs = self._arg(node.args, values), self._arg(node.kwargs, values)
        convert = CONVERTERS.get(name)
        with self.tracer.converting(ctx.where, scope, prefixed=ctx.where, module_type=module_type, source=node.name):
            if convert is None:
                result = self._fallback(name, target, ctx, args, kwargs)
            else:
                result = convert(ctx, *args, **kwargs)
        _check_specs(ctx, result)
        return result

    def _getitem(self, node, values):
        source, index = node.args
        produced = values[source.name]
        value = produced[index]
        if value is None:
            raise UnsupportedOpError(f"{source.target} (node {source.name!r}): output {index} is read by the model, "
                                     f"but flopcount does not compute it")
        return value

    def _fallback(self, name: str, target, ctx, args, kwargs):
        """The ATen op as a fallback op: its tensor inputs become the op's inputs, the rest of
        the call stays in its attrs."""
        outs = ctx.out if isinstance(ctx.out, tuple) else (ctx.out,)
        if not outs or any(not isinstance(o, Spec) for o in outs):
            raise UnsupportedOpError(f"{ctx.where}: no converter, and not every output is a tensor whose "
                                     f"shape torch recorded")
        inputs: list = []

        def slot(a):
            if isinstance(a, Tensor):
                inputs.append(a)
                return Slot(len(inputs) - 1)
            if isinstance(a, (list, tuple)):
                return type(a)(slot(v) for v in a)
            if hasattr(a, "np"):  # a runtime dtype back to torch's for the call
                import torch

                return getattr(torch, a.name)
            return a

        call_args, call_kwargs = slot(args), {k: slot(v) for k, v in kwargs.items()}
        self.fallbacks[name] += 1
        import torch

        random = torch.Tag.nondeterministic_seeded in getattr(target, "tags", ())
        from ..dispatch import apply

        return apply(fallback_op(name, random), *inputs, target=target, args=call_args, kwargs=call_kwargs,
                     specs=ctx.out)


def _check_specs(ctx, result) -> None:
    """The converted value has the shape and dtype torch recorded (a converter bug otherwise)."""
    want = ctx.out
    got = result
    if isinstance(want, tuple) and isinstance(got, (tuple, list)):
        pairs = list(zip(got, want))
    elif isinstance(want, Spec) and isinstance(got, Tensor):
        pairs = [(got, want)]
    else:
        return
    for value, spec in pairs:
        if not (isinstance(value, Tensor) and isinstance(spec, Spec)):
            continue
        if tuple(value.shape) != spec.shape or value.dtype is not spec.dtype:
            raise ShapeError(f"{ctx.where}: converted to {value.dtype.name}{list(value.shape)}, but torch "
                             f"recorded {spec.dtype.name}{list(spec.shape)}")


def _placeholders(captured) -> tuple[dict, dict]:
    """({placeholder name: tensor} for parameters, buffers and constants,
    {state-dict name: (tensor, kind)} to register in the graph)."""
    values, params = {}, {}
    by_torch_tensor: dict = {}   # tied weights: one graph parameter for one torch tensor
    for name, (target, t, kind) in captured.params.items():
        if id(t) in by_torch_tensor:
            values[name] = by_torch_tensor[id(t)]
            continue
        tensor = from_torch(t, f"{kind} {target!r}")
        if kind == "param":
            tensor = Parameter(tensor)
        elif kind == "const" and tensor.data is not None:
            values[name] = by_torch_tensor[id(t)] = tensor   # a constant of the graph
            continue
        else:
            kind = "buffer"
        params[target] = (tensor, kind)
        values[name] = by_torch_tensor[id(t)] = tensor
    return values, params


def convert(captured, name: str | None = None) -> tuple[Graph, list]:
    """(Graph, notes) for a captured program; notes name the ATen ops that have no converter."""
    if has_complex(captured):   # the runtime has no complex dtype: real (real, imaginary) pairs instead
        captured = lower_complex(captured)
    values, params = _placeholders(captured)
    values.update(captured.constants)
    walk = _Walk(captured, values)
    graph = trace_import(walk, list(captured.inputs), params, [(spec.shape, spec.dtype) for spec in captured.input_specs])
    graph.name = name or captured.name
    graph.module_types = dict(captured.module_types)
    notes = list(captured.notes)
    if walk.fallbacks:
        listed = ", ".join(f"{op} ({n} call{'s' if n != 1 else ''})" for op, n in sorted(walk.fallbacks.items()))
        notes.append(f"no flopcount mapping for {listed}: counted as 0 and run by torch")
    return graph, notes


__all__ = ["convert", "spec_of", "scope_of", "module_path", "class_name"]
