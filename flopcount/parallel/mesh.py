"""A rank's graph of a training step on a data x tensor mesh: the SBP pass applied per axis.

The data axis splits the batch (the graph inputs along dim 0, the output gradient with its
output); the tensor axis places the parameters (Megatron's layers), with sequence parallelism
when asked. The pass runs on the data axis first, then on the tensor axis of the data-local
graph, so a rank's graph holds both axes' boxing and local shapes.

    >>> import flopcount.runtime as rt
    >>> from flopcount.runtime.graph.training import trace_training
    >>> mlp = rt.nn.Sequential(rt.nn.Linear(8, 32), rt.nn.ReLU(), rt.nn.Linear(32, 8))
    >>> rank = shard_step(trace_training(mlp, rt.randn(4, 8)), data=2, tensor=2)
    >>> rank.graph.inputs[0].shape, rank.params["0.weight"]
    ((2, 8), (B, S(0)))
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..runtime.errors import ShapeError
from ..runtime.graph.passes.sbp import MeshAxis, shard
from ..runtime.graph.training import TrainingGraph
from ..runtime.sbp import B, P, S

DATA, TENSOR = "dp", "tp"


@dataclass
class RankGraph:
    """One rank's training step: its graph (forward nodes first), what each axis' pass
    decided, and where the step's pieces are in the graph.

    ``params``: parameter name -> SBP per axis (data, tensor); ``gradients``: parameter name ->
    the graph output holding its gradient; ``seed``/``output``: the output gradient input and
    the model output; ``origin[i]``: the node of the global training graph that local node i
    computes or (a boxing node) serves."""

    graph: object
    axes: tuple
    passes: list
    n_forward: int
    params: dict = field(default_factory=dict)
    gradients: dict = field(default_factory=dict)
    seed: str = ""
    output: str = ""
    origin: list = field(default_factory=list)

    def sbp(self, name: str) -> tuple:
        """The SBP of value ``name`` of the rank's graph, per axis (a value the tensor axis'
        pass made, such as a boxing's result, has the data-axis SBP of the value it holds)."""
        out = []
        for p in reversed(self.passes):
            out.append(p.sbp.get(name))
            name = p.source.get(name, name)
        return tuple(reversed(out))


def mesh_axes(data: int = 1, tensor: int = 1, sequence_parallel: bool = False) -> tuple:
    """The SBP axes of a plan: data parallel, then tensor parallel (either may be 1)."""
    axes = []
    if data > 1:
        axes.append(MeshAxis(DATA, data, "data"))
    if tensor > 1:
        axes.append(MeshAxis(TENSOR, tensor, "tensor", sequence_dim=1 if sequence_parallel else None))
    return tuple(axes)


def shard_step(step: TrainingGraph, data: int = 1, tensor: int = 1, sequence_parallel: bool = False,
               index: tuple = (0, 0), regather: bool = True) -> RankGraph:
    """The graph of the rank at ``index`` (its place on the data and tensor axes).

    The graph inputs are split along dim 0 on the data axis (a batch of ``data`` x the
    micro-batch); everything else follows from the ops' SBP rules."""
    graph = step.graph
    n_forward = step.n_forward
    out_index = [v.name for v in graph.outputs].index(step.output)
    grad_index = {p: [v.name for v in graph.outputs].index(v.name) for p, v in step.gradients.items()}
    passes = []
    origin = list(range(len(graph.nodes)))
    for axis in mesh_axes(data, tensor, sequence_parallel):
        position = index[0] if axis.kind == "data" else index[1]
        inputs = {v.name: S(0) for v in graph.inputs if v.name != step.seed} if axis.kind == "data" else {}
        if axis.kind == "data":
            for v in graph.inputs:
                if v.name != step.seed and (not v.shape or v.shape[0] % axis.size):
                    raise ShapeError(f"data parallel: input {v.name!r} of shape {v.shape} does not split "
                                     f"along its batch dim into {axis.size} ranks")
        wanted = {graph.outputs[i].name: ("param:" + p, P) for p, i in grad_index.items()}
        result = shard(graph, axis, position, inputs=inputs, tied={step.seed: graph.outputs[out_index].name},
                       outputs=wanted, backward_from=n_forward, regather=regather)
        origin = [origin[i] if 0 <= i < len(origin) else -1 for i in result.origin]
        passes.append(result)
        graph, n_forward = result.graph, result.n_forward
    params = {name: tuple(p.params.get(name, B) for p in passes) for name in step.gradients}
    params.update({name: tuple(p.params.get(name, B) for p in passes) for name in graph.parameters})
    return RankGraph(graph, tuple(p.axis for p in passes), passes, n_forward, params,
                     {p: graph.outputs[i].name for p, i in grad_index.items()}, step.seed,
                     graph.outputs[out_index].name, origin)
