"""``trace(module_or_fn, *example_inputs)``: record every dispatched op into a Graph.

While tracing, ``dispatch.apply`` hands each op to ``Tracer.record``. The tracer runs only the
op's shape rule and returns meta tensors whose ``_value`` is the graph value they stand for, so
a model traces without computing anything (on meta inputs and a meta model, without memory).

An op input is one of: a value of this trace (``tensor._value``), a parameter or buffer of a
module being traced (by identity: they become named graph inputs), or a constant (a tensor with
data: real, or meta carrying a small array such as the 0-d tensor of ``x * 2``). An op whose
inputs are all constants is not recorded: it runs at once on the CPU and its result is a
constant again, which is how shape arithmetic folds away; unless its outputs would exceed
``folding.FOLD_LIMIT_BYTES``: then it is recorded as a node like any other, so tracing stays within
bounded memory (the graph computes it when it runs).
"""

from __future__ import annotations

import inspect

from ..device import META
from ..dispatch import state
from ..errors import DeviceError, FlopcountError
from ..tensor import Tensor
from .folding import fold
from .ir import Graph, Node
from .tree import flatten


class TraceError(FlopcountError):
    """Something in the traced function cannot become part of a graph."""


def trace(fn, *example_inputs, **example_kwargs) -> Graph:
    """Record ``fn(*example_inputs, **example_kwargs)`` as a Graph.

    ``fn`` is a Module (its parameters and buffers become named graph inputs; node scopes are
    dotted module paths such as ``layer1.0.conv1``) or any function. Example inputs may be real
    or meta tensors (a huge model traces on meta without allocating), nested in tuples, lists
    and dicts; plain Python values among them are baked into the graph. The graph is
    specialized to the example shapes and dtypes.

    >>> import flopcount.runtime as rt
    >>> g = rt.trace(lambda x: (x * 2).relu(), rt.randn(2, 3))
    >>> [n.op_name for n in g.nodes]
    ['mul', 'relu']
    """
    return Tracer(fn).run(example_inputs, example_kwargs)


class Tracer:
    """Owns the dispatcher while one trace runs (``state.tracer``)."""

    def __init__(self, fn):
        from ..nn.modules.module import Module
        from ..nn.parameter import Parameter

        self._Module, self._Parameter = Module, Parameter
        self.fn = fn
        self.graph = Graph()
        self.graph.name = type(fn).__name__ if isinstance(fn, Module) else getattr(fn, "__name__", "graph")
        self.known: dict = {}    # id(tensor) -> Value of a parameter or buffer; a key per constant
        self.owned: set = set()  # ids of the Values this trace made for inputs and node outputs
        self.paths: dict = {}    # id(module) -> dotted path
        if isinstance(fn, Module):
            self._adopt(fn)

    # --- setup ---------------------------------------------------------------------------
    def _adopt(self, root) -> None:
        """Give ``root``'s modules their dotted paths and its tensors graph names."""
        for path, m in root.named_modules():
            self.paths.setdefault(id(m), path)
        for name, p in root.named_parameters():
            if id(p) not in self.known:
                self.known[id(p)] = self.graph.add_parameter(name, p, "param", unique=True)
        for name, b in root.named_buffers():
            if id(b) not in self.known:
                self.known[id(b)] = self.graph.add_parameter(name, b, "buffer", unique=True)

    def run(self, args: tuple, kwargs: dict) -> Graph:
        if state.tracer is not None:
            raise TraceError("trace: a trace is already running (tracing inside a trace is not supported)")
        g = self.graph
        proxies_args = tuple(self._proxy(a, name) for a, name in zip(args, self._arg_names(args, kwargs)))
        proxies_kwargs = {k: self._proxy(v, k) for k, v in kwargs.items()}
        g.input_tree = flatten((args, kwargs), what="input")[1]
        saved_stack = state.scope_stack
        state.scope_stack = []
        state.tracer = self
        try:
            out = self.fn(*proxies_args, **proxies_kwargs)
        except DeviceError as exc:
            if "meta tensor" not in str(exc):
                raise
            raise TraceError(f"trace of {g.name}: {exc}; the traced code reads a value that the graph "
                             f"computes (.item(), .numpy(), or Python control flow on a tensor), "
                             f"but a trace records ops on shapes only") from exc
        finally:
            state.tracer = None
            state.scope_stack = saved_stack
        leaves, g.output_tree = flatten(out, what="output")
        g.outputs = [self._value_of(t, "output") or self._constant(t) for t in leaves]
        return g

    def _arg_names(self, args: tuple, kwargs: dict) -> list:
        """Graph input names from the forward signature (``x``), else ``input_0``..."""
        target = self.fn.forward if isinstance(self.fn, self._Module) else self.fn
        try:
            params = list(inspect.signature(target).parameters.values())
        except (TypeError, ValueError):
            params = []
        positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        var = next((p.name for p in params if p.kind == p.VAR_POSITIONAL), None)
        names = []
        for i in range(len(args)):
            if i < len(positional):
                names.append(positional[i])
            elif var is not None:
                names.append(f"{var}_{i - len(positional)}")
            else:
                names.append(f"input_{i}")
        return names

    def _proxy(self, obj, name: str):
        """Replace each tensor in ``obj`` by a meta tensor standing for a new graph input."""
        leaves = flatten(obj, what="input")[0]
        if not leaves:
            return obj
        if isinstance(obj, Tensor):
            return self._input_proxy(obj, name)
        counter = iter(range(len(leaves)))
        return _map_tensors(obj, lambda t: self._input_proxy(t, f"{name}_{next(counter)}"))

    def _input_proxy(self, t: Tensor, name: str) -> Tensor:
        v = self.graph.add_input(name, t.shape, t.dtype)
        self.owned.add(id(v))
        proxy = Tensor._make(None, t.shape, t.dtype, META)
        proxy._value = v
        return proxy

    # --- recording -------------------------------------------------------------------------
    def record(self, op, inputs: tuple, attrs: dict):
        """Called by ``dispatch.apply`` for every op while tracing."""
        scope, module_type = self._scope()
        values = []
        constant = True
        for t in inputs:
            v = None if t is None else self._value_of(t, op.name)
            values.append(v)
            if v is not None:
                constant = False
        if constant and not op.random:
            folded = fold(op, inputs, attrs)
            if folded is not None:
                return folded
        values = [self._constant(t) if v is None and t is not None else v for t, v in zip(inputs, values)]
        specs = op.shape(*inputs, **attrs)
        multi = isinstance(specs, tuple)
        outs = [self.graph.new_value(op.name, s.shape, s.dtype) for s in (specs if multi else (specs,))]
        self.graph.nodes.append(Node(op, values, outs, attrs, scope, module_type))
        tensors = []
        for v in outs:
            self.owned.add(id(v))
            t = Tensor._make(None, v.shape, v.dtype, META)
            t._value = v
            tensors.append(t)
        return tuple(tensors) if multi else tensors[0]

    def _value_of(self, t: Tensor, where: str):
        """The graph value ``t`` stands for, or None when ``t`` is a constant."""
        v = t._value
        if v is not None and id(v) in self.owned:
            return v
        v = self.known.get(id(t))
        if v is not None:
            return v
        if isinstance(t, self._Parameter):
            v = self.known[id(t)] = self.graph.add_parameter("param", t, "param", unique=True)
            return v
        if t.data is None:
            raise TraceError(
                f"trace: {where} got a meta tensor of shape {t.shape} with no data that is neither an "
                f"input of the trace, a parameter or buffer of a traced module, nor computed in the "
                f"trace; pass it as an input or register it as a buffer")
        return None

    def _constant(self, t: Tensor):
        # Keyed by the array, and held by a new Tensor over it: ``c[i] = v`` later in the trace
        # gives ``c`` a new array, which must not change what earlier nodes read.
        key = ("const", id(t.data), t.shape, t.dtype.name)
        v = self.known.get(key)
        if v is None:
            snapshot = Tensor._make(t.data, t.shape, t.dtype, t.device)
            v = self.known[key] = self.graph.add_constant(snapshot)
        return v

    def _scope(self) -> tuple[str, str]:
        """(dotted scope, module type) of the op being recorded, from the scope stack."""
        parts: list = []
        module_type = ""
        for entry in state.scope_stack:
            if isinstance(entry, str):
                parts.append(entry)
                continue
            path = self.paths.get(id(entry))
            if path is None:  # a module reached from a traced function: it becomes a root
                self._adopt(entry)
                path = self.paths[id(entry)]
            parts = [path] if path else []
            module_type = type(entry).__name__
        return ".".join(p for p in parts if p), module_type


def _map_tensors(obj, fn):
    if isinstance(obj, Tensor):
        return fn(obj)
    if isinstance(obj, tuple):
        return tuple(_map_tensors(o, fn) for o in obj)
    if isinstance(obj, list):
        return [_map_tensors(o, fn) for o in obj]
    if isinstance(obj, dict):
        return {k: _map_tensors(v, fn) for k, v in obj.items()}
    return obj
