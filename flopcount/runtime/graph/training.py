"""``trace_training(module, *inputs)``: one training step (forward, then backward) as one Graph.

The forward runs under the tracer with autograd recording, as in eager mode; backward then
calls every op's gradient rule on the recorded nodes, and the tracer records those ops too. So
the graph holds exactly the work the runtime's autograd does: the backward ops, the
activations they read (the forward values still used after the forward, which a liveness
analysis of this graph reports as the memory saved for backward), and a gradient output for
every parameter. The gradient of the model's output comes in as a graph input (``grad_<name>``):
the loss is not the model's, so it is not traced.

    >>> import flopcount.runtime as rt
    >>> step = trace_training(rt.nn.Linear(4, 2), rt.randn(3, 4))
    >>> [n.op_name for n in step.graph.nodes[:step.n_forward]], sorted(step.gradients)
    (['linear'], ['bias', 'weight'])
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..autograd import backward, record_node
from ..dispatch import enable_grad, state
from ..errors import FlopcountError
from ..tensor import Tensor
from .ir import Graph
from .trace import Tracer
from .tree import tensor_leaves


@dataclass
class TrainingGraph:
    """A traced training step: ``graph`` (forward nodes first, then backward), the number of
    forward nodes, the output gradient's graph input, and parameter name -> gradient value."""

    graph: Graph
    n_forward: int
    output: str = ""                 # the model output the backward starts from
    seed: str = ""                   # the graph input holding that output's gradient
    gradients: dict = field(default_factory=dict)


class _TrainingTracer(Tracer):
    """A tracer that also records autograd nodes, so ``backward()`` inside the trace records
    the gradient ops, each scoped to the module whose forward op it differentiates."""

    def record(self, op, inputs: tuple, attrs: dict):
        outs = super().record(op, inputs, attrs)
        if state.grad_enabled and op.vjp is not None and any(
                t is not None and t.requires_grad for t in inputs):
            record_node(op, inputs, attrs, outs if isinstance(outs, tuple) else (outs,))
        return outs

    def __init__(self, step, module):
        super().__init__(step)
        self.module = module
        self._adopt(module)

    def _arg_names(self, args: tuple, kwargs: dict) -> list:
        """The module's forward parameter names (``input_ids``), not the step function's."""
        saved, self.fn = self.fn, self.module
        try:
            return super()._arg_names(args, kwargs)
        finally:
            self.fn = saved

    def _scope(self):
        if state.phase != "backward":
            return super()._scope()
        module = state.backward_module
        if module is None:
            return "", ""
        return self.paths.get(id(module), ""), type(module).__name__


def trace_training(module, *inputs, **kwargs) -> TrainingGraph:
    """Trace forward and backward of ``module`` on ``inputs`` (real or meta tensors).

    Every parameter that requires grad gets a gradient output (a parameter the output does not
    depend on gets none). The module's parameters keep their ``.grad`` as they were.
    """
    params = [(name, p) for name, p in module.named_parameters() if p.requires_grad]
    saved = [p.grad for _, p in params]
    seed_name: list = []

    def step(*args, **kw):
        out = module(*args, **kw)
        root = _first_floating(out)
        seed = tracer._input_proxy(Tensor._make(None, root.shape, root.dtype, root.device),
                                   f"grad_{root._value.name}")
        seed_name.append((root._value.name, seed._value.name))
        for _, p in params:
            p.grad = None
        backward(root, seed)
        return out, {name: p.grad for name, p in params if p.grad is not None}

    tracer = _TrainingTracer(step, module)
    try:
        with enable_grad():
            graph = tracer.run(inputs, kwargs)
    finally:
        for (_, p), g in zip(params, saved):
            p.grad = g
    n_forward = _forward_count(graph, seed_name[0][1])
    grads = _gradient_outputs(graph)
    return TrainingGraph(graph, n_forward, seed_name[0][0], seed_name[0][1], grads)


def _first_floating(out) -> Tensor:
    for t in tensor_leaves(out):
        if t.dtype.is_floating_point and t.requires_grad:
            return t
    raise FlopcountError("trace_training: the model returns no floating output that depends on "
                         "its parameters, so there is nothing to differentiate")


def _forward_count(graph: Graph, seed: str) -> int:
    """Nodes before the first one that reads the output gradient (or its descendants) belong to
    the forward: backward starts when the seed is first read."""
    for i, node in enumerate(graph.nodes):
        if any(v is not None and v.name == seed for v in node.inputs):
            return i
    return len(graph.nodes)


def _gradient_outputs(graph: Graph) -> dict:
    """Parameter name -> its gradient value, read from the output tree ``(out, {name: grad})``."""
    return {name: graph.outputs[leaf] for name, leaf in graph.output_tree["tuple"][1]["dict"]}
