"""``GraphModule``: what runs a Graph (plain data), as torch.fx's GraphModule runs an fx.Graph;
it keeps the programs lowered from its graph and the graph's tensors per device.

A run goes node by node through ``dispatch.apply``, so observers see every op with the
node's scope, autograd records as in eager mode, and values are released at their last use
(the graph's memory plan). An error while running a node names the node and its scope, as
torch.fx's interpreter does ("while executing %y = conv(%x, %w) in layer1.0.conv1 (Conv2d)").
A CPU run that nothing observes takes ``plain_run`` instead: the same kernels, without the
per-node bookkeeping nobody reads.
"""

from __future__ import annotations

from typing import NamedTuple

from ..allocator import keep_freed_memory
from ..device import CPU, META
from ..dispatch import apply, state
from ..errors import DeviceError, ShapeError, add_context
from ..tensor import Tensor
from . import plain_run
from .ir import Graph
from .passes.memory_plan import Slots
from .printing import node_summary, type_str
from .tree import flatten, unflatten


class NodeScope(NamedTuple):
    """What the executor puts on the scope stack for a node when asked (``node_scopes=True``):
    its module scope and its index in the graph, so an observer, and autograd for the node's
    gradient ops, know the exact node an op came from.

    >>> NodeScope("layer1.0.conv1", 12).node
    12
    """

    path: str
    node: int

    def __str__(self) -> str:
        return self.path


class GraphModule:
    """Run ``graph``: ``gm(*inputs)``, or ``gm.run(*inputs, before=, after=)`` with per-node
    callbacks; ``gm.to(device)`` runs a moved copy of the graph from then on (the graph it was
    given keeps its tensors).

    >>> import flopcount.runtime as rt
    >>> gm = rt.GraphModule(rt.trace(rt.nn.Linear(4, 2), rt.randn(3, 4)))
    >>> gm(rt.randn(3, 4)).shape
    (3, 2)
    """

    def __init__(self, graph: Graph):
        if not isinstance(graph, Graph):
            raise TypeError(f"GraphModule: expects a Graph (rt.trace's or a loaded one), got {type(graph).__name__}")
        self.graph = graph
        self.cache: dict = {}  # lowered programs, and the graph's tensors per device

    def __call__(self, *args, **kwargs):
        return run(self, args, kwargs)

    def run(self, *args, before=None, after=None, **kwargs):
        """Run with per-node callbacks: ``before(node, inputs)`` and ``after(node, outputs)``
        (tensors), e.g. to time each node or to watch memory."""
        return run(self, args, kwargs, before=before, after=after)

    def to(self, device) -> "GraphModule":
        self.graph, self.cache = self.graph.to(device), {}
        return self

    def __repr__(self) -> str:
        return repr(self.graph)


class _Program(Slots):
    """A graph lowered for running: every value gets a slot in a flat list; each step carries
    its node's scope."""

    __slots__ = ("node_scopes",)

    def __init__(self, graph):
        super().__init__(graph)
        self.steps = [(node, ins, outs, free, node.scope) for node, ins, outs, free in self.steps]
        self.node_scopes = [NodeScope(node.scope, i) for i, node in enumerate(graph.nodes)]


def _bind(graph, args: tuple, kwargs: dict) -> list:
    """The call's tensors in graph-input order, checked against the traced types."""
    trace_kwargs = [k for k, _ in graph.input_tree["tuple"][1]["dict"]] if "tuple" in graph.input_tree else []
    if set(kwargs) != set(trace_kwargs):
        raise TypeError(f"graph {graph.name}: called with keyword arguments {sorted(kwargs)}, "
                        f"traced with {sorted(trace_kwargs)}")
    tensors = flatten((tuple(args), {k: kwargs[k] for k in trace_kwargs}), what="input")[0]
    if len(tensors) != len(graph.inputs):
        raise TypeError(f"graph {graph.name}: expects {len(graph.inputs)} tensor input(s) "
                        f"({', '.join(v.name for v in graph.inputs)}), got {len(tensors)}")
    for v, t in zip(graph.inputs, tensors):
        if tuple(t.shape) != v.shape or t.dtype is not v.dtype:
            raise ShapeError(f"graph {graph.name}: input %{v.name} expects {type_str(v.shape, v.dtype)}, "
                             f"got {type_str(tuple(t.shape), t.dtype)} (a graph is specialized to its "
                             f"traced shapes; trace again, or use rt.compile(module) which retraces)")
    return tensors


def _fixed_tensors(module, dev) -> dict:
    """Parameters and constants as the run on ``dev`` needs them (cached per device)."""
    graph = module.graph
    key = ("fixed", str(dev))
    cached = module.cache.get(key)
    if cached is not None:
        return cached
    out = {}
    for name in graph.parameters:
        t = graph.tensors[name]
        if t.device != dev:
            if dev.type != "meta":
                raise DeviceError(f"graph {graph.name}: inputs are on {dev} but parameter {name!r} is on "
                                  f"{t.device}; call graph.to({str(dev)!r}) first")
            t = Tensor._make(None, t.shape, t.dtype, META)  # a meta run needs only the shapes
        out[name] = t
    for name in graph.constants:
        t = graph.tensors[name]
        out[name] = t if t.device == dev else _constant_on(t, dev)
    module.cache[key] = out
    return out


def _constant_on(t: Tensor, dev) -> Tensor:
    if dev.type == "meta":  # keep a CPU value: shape rules may read small constants
        return Tensor._make(t.data if t.device.type in ("cpu", "meta") else None, t.shape, t.dtype, META)
    if t.device.type == "meta":  # a meta constant carries its value as a numpy array
        t = Tensor._make(t.data, t.shape, t.dtype, CPU)
    return t.to(dev)


def run(module, args: tuple, kwargs: dict, before=None, after=None, node_scopes: bool = False):
    """Execute ``module``'s graph (a GraphModule: its programs are cached there) on the call's
    arguments; returns outputs nested as traced. With ``node_scopes`` each node runs under its
    :class:`NodeScope` instead of its scope string."""
    graph = module.graph
    tensors = _bind(graph, args, kwargs)
    device = tensors[0].device if tensors else graph.device
    if device.type == "cpu":
        keep_freed_memory()  # each op's output reuses freed memory instead of faulting pages in
    fixed = _fixed_tensors(module, device)
    if plain_run.applies(graph, module.cache, tensors, before, after, node_scopes):
        outputs = plain_run.run(graph, module.cache, tensors, fixed)
        if outputs is not None:
            return unflatten(graph.output_tree, outputs)
    prog = module.cache.get("program")
    if prog is None:
        prog = module.cache["program"] = _Program(graph)
    env: list = [None] * prog.n_slots
    for slot, name in prog.fixed:
        env[slot] = fixed[name]
    for slot, t in zip(prog.input_slots, tensors):
        env[slot] = t
    stack = state.scope_stack
    for k, (node, ins, outs, free, scope) in enumerate(prog.steps):
        inputs = [None if i < 0 else env[i] for i in ins]
        if before is not None:
            before(node, inputs)
        if node_scopes:
            scope = prog.node_scopes[k]
        if scope:
            stack.append(scope)
        try:
            result = apply(node.op, *inputs, **node.attrs)
        except Exception as exc:
            add_context(exc, f"while executing {node_summary(node)}")
            raise
        finally:
            if scope:
                stack.pop()
        if len(outs) == 1:
            env[outs[0]] = result
            results = (result,)
        else:
            results = result
            for s, t in zip(outs, result):
                env[s] = t
        if after is not None:
            after(node, results)
        for s in free:
            env[s] = None
    return unflatten(graph.output_tree, [env[s] for s in prog.output_slots])
