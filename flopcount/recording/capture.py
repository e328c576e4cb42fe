"""A recorded eager run as a Graph: the IR the graph view traces, captured by a real run.

``capture(model, *inputs)`` runs the model once (no grad) and returns the Graph of what it ran,
as ``rt.trace(model, *inputs)`` returns the Graph of what it would run;
``captured_graph(recorder, model, outputs)`` turns the forward op events of a run into graph
nodes. Each node's ``meta`` holds where the run was: ``scope`` and ``module_type`` (the module
call it ran in, as the tracer stamps them), ``call`` (that call's index in ``recorder.calls``,
whose ``parent`` links make the call tree) and ``taped`` (autograd kept its tensors). The
model's parameters and buffers become named graph parameters and its inputs graph inputs, as
in a trace; an op computed from constants only is left out and its output is a constant, as the
tracer folds it. So a trace of the same model on the same inputs gives the same graph, node by
node (``tests/graph_parser/test_views_agree.py``), and the graph's passes and liveness apply to
an eager run as they are.

    >>> import flopcount.runtime as rt
    >>> from flopcount.recording.recorder import Recorder
    >>> net, x = rt.nn.Sequential(rt.nn.Linear(4, 2), rt.nn.ReLU()), rt.randn(3, 4)
    >>> recorder = Recorder(net, [x])
    >>> with recorder.attached():
    ...     y = net(x)
    >>> g = captured_graph(recorder, net, [y])
    >>> [(n.op_name, n.scope, n.meta["call"]) for n in g.nodes]
    [('linear', '0', 1), ('relu', '1', 2)]
"""

from __future__ import annotations

from ..runtime.device import META
from ..runtime.dispatch import no_grad
from ..runtime.graph.ir import Graph, Node, Value
from ..runtime.graph.tree import flatten, tensor_leaves
from ..runtime.tensor import Tensor
from .recorder import Recorder
from .state import preserved


def capture(model, *inputs, **named_inputs) -> Graph:
    """The Graph of one eager run of ``model(*inputs, **named_inputs)`` in eval mode, without
    grad; the model is left as it was.

    >>> import flopcount.runtime as rt
    >>> net = rt.nn.Sequential(rt.nn.Linear(4, 2), rt.nn.ReLU())
    >>> [n.op_name for n in capture(net, rt.randn(3, 4)).nodes]
    ['linear', 'relu']
    """
    with preserved(model):
        model.eval()
        recorder = Recorder(model, tensor_leaves((list(inputs), named_inputs)))
        with recorder.attached(), no_grad():
            out = model(*inputs, **named_inputs)
        return captured_graph(recorder, model, flatten(out, what="output")[0])


def captured_graph(recorder, model, outputs: list, name: str = "") -> Graph:
    """The forward ops ``recorder`` saw as a Graph whose outputs are the tensors ``outputs``
    (the run's output leaves, still noted by the recorder)."""
    g = Graph()
    g.name = name or type(model).__name__
    values = _root_values(g, recorder, model)
    calls = recorder.calls
    for e in recorder.events:
        if e.phase != "forward" or e.constant:
            continue
        inputs = [None if spec is None else values.get(key) or _constant(g, values, key, spec)
                  for key, spec in zip(e.input_ids, e.inputs)]
        outs = [g.new_value(e.op.name, spec.shape, spec.dtype) for spec in e.outputs]
        values.update(zip(e.output_ids, outs))
        module_type = type(calls[e.call].module).__name__ if e.call >= 0 else ""
        g.nodes.append(Node(e.op, inputs, outs, e.attrs, e.path, module_type,
                            meta={"call": e.call, "taped": e.taped}))
    roots = {id(t): -1 - k for k, t in enumerate(recorder.roots)}  # their notes end with the run
    for t in outputs:
        key = recorder.serial(t)
        key = roots.get(id(t)) if key is None else key
        g.outputs.append(values.get(key) or _constant(g, values, key, t))
    return g


def _root_values(g: Graph, recorder, model) -> dict:
    """Graph values of the roots, by their serial: parameters and buffers under their dotted
    names, the inputs as ``input_0``, ``input_1``..."""
    names = {}
    for kind, named in (("param", model.named_parameters()), ("buffer", model.named_buffers())):
        for path, t in named:
            names.setdefault(id(t), (path, kind))
    values = {}
    for k, t in enumerate(recorder.roots):
        found = names.get(id(t))
        if found is None:
            v = g.add_input(f"input_{len(g.inputs)}", t.shape, t.dtype)
        else:
            v = g.add_parameter(found[0], t, found[1], unique=True)
        values[-1 - k] = v
    return values


def _constant(g: Graph, values: dict, key, spec) -> Value:
    """A constant of the graph standing for a tensor made from constants only (shapes only:
    the recorder kept no data). ``key`` is the op output it is (None: made outside the run)."""
    v = g.add_constant(Tensor._make(None, tuple(spec.shape), spec.dtype, META))
    if key is not None:
        values[key] = v
    return v
