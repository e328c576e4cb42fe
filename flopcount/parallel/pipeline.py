"""Pipeline stages: a rank's graph cut into ``pp`` graphs of consecutive blocks, as Megatron
cuts a transformer into equal runs of layers.

Stage s holds blocks [s·k, (s+1)·k) of the model's repeated blocks (``blocks.py``); what comes
before the first block (embeddings) goes to the first stage, what comes after the last (final
norm, head) to the last. A backward node goes where the forward of its module went. A node that
reads no activation (a view of a weight) goes to every stage that reads it. Each stage is a
``Graph`` of its own: the values it receives from another stage are its inputs, the values it
sends and its gradients are its outputs, so the ordinary analyses (cost, liveness) apply.

A value a stage sends is a ``send_recv`` per micro-batch (activations forward, their gradients
backward), except the gradient of a parameter that several stages hold (a word embedding tied
to the LM head): each stage keeps its own part, and the parts are summed once per step
across those stages, as Megatron all-reduces the embedding group.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..runtime.errors import ShapeError
from ..runtime.graph.ir import Graph
from .blocks import NO_BLOCKS, Blocks, find_blocks


@dataclass
class Stage:
    """One pipeline stage of a rank's graph.

    ``graph``: its nodes in order (forward first); ``n_forward``: how many are forward;
    ``blocks``: the block indices it holds; ``sends`` / ``recvs``: (value, bytes, "forward" or
    "backward") per micro-batch; ``shared``: parameter name -> the stages that hold it, for
    the parameters whose gradients are summed across stages once per step; ``origin[i]``: the
    node of the rank graph that stage node i is."""

    index: int
    graph: Graph
    n_forward: int
    blocks: range
    sends: list = field(default_factory=list)
    recvs: list = field(default_factory=list)
    shared: dict = field(default_factory=dict)
    origin: list = field(default_factory=list)


def split_stages(rank, pp: int, blocks: Blocks | None = None) -> list:
    """The ``pp`` stages of ``rank`` (a ``RankGraph``): one stage (the whole graph) for pp = 1."""
    graph = rank.graph
    blocks = blocks if blocks is not None else find_blocks(n.scope for n in graph.nodes[:rank.n_forward])
    if pp > 1 and (blocks is NO_BLOCKS or blocks.count == 0):
        raise ShapeError("pipeline parallelism: the model has no repeated blocks (layers) to cut into stages")
    if pp > 1 and blocks.count % pp:
        raise ShapeError(f"pipeline parallelism: {blocks.count} layers do not split evenly into {pp} stages")
    per = blocks.count // pp if pp > 1 else max(blocks.count, 1)
    stage_of = _assign(rank, pp, blocks, per)
    readers = _reader_stages(rank.graph, stage_of)
    parts = _gradient_parts(rank)
    return [_build(rank, s, stage_of, readers, parts,
                   range(s * per, (s + 1) * per) if pp > 1 else range(blocks.count)) for s in range(pp)]


def _assign(rank, pp: int, blocks: Blocks, per: int) -> list:
    """Node index -> set of stages that run it."""
    graph, n_fwd = rank.graph, rank.n_forward
    nodes = graph.nodes
    active = _activation_nodes(graph)
    stage_of: list = [None] * len(nodes)
    block_nodes = [i for i in range(n_fwd) if blocks.index_of(nodes[i].scope) is not None]
    first, last = (block_nodes[0], block_nodes[-1]) if block_nodes else (n_fwd, -1)
    current = 0
    for i in range(n_fwd):
        b = blocks.index_of(nodes[i].scope)
        if b is not None:
            current = min(b // per, pp - 1)
        elif i > last:
            current = pp - 1
        elif i < first:
            current = 0
        stage_of[i] = {current}
    by_scope: dict = {}
    for i in range(n_fwd):
        by_scope.setdefault(nodes[i].scope, set()).update(stage_of[i])
    producer = {v.name: i for i, n in enumerate(nodes) for v in n.outputs}
    for i in range(n_fwd, len(nodes)):
        scope = nodes[i].scope
        b = blocks.index_of(scope)
        if b is not None:
            stage_of[i] = {min(b // per, pp - 1)}
            continue
        stages = by_scope.get(scope)
        if stages and len(stages) == 1:
            stage_of[i] = set(stages)
            continue
        ins = [producer[v.name] for v in nodes[i].inputs if v is not None and v.name in producer]
        stage_of[i] = set(stage_of[ins[0]]) if ins else {pp - 1}
    # a node that reads no activation (a view of a weight) runs wherever it is read
    readers: dict = {}
    for i, n in enumerate(nodes):
        for v in n.inputs:
            if v is not None and v.name in producer:
                readers.setdefault(producer[v.name], set()).update(stage_of[i])
    for i in reversed(range(len(nodes))):
        if i not in active and i in readers:
            stage_of[i] = set(readers[i])
            for v in nodes[i].inputs:  # its own parameter-only inputs follow it
                if v is not None and v.name in producer and producer[v.name] not in active:
                    readers.setdefault(producer[v.name], set()).update(stage_of[i])
    return stage_of


def _activation_nodes(graph) -> set:
    act = {v.name for v in graph.inputs}
    out = set()
    for i, node in enumerate(graph.nodes):
        if any(v is not None and v.name in act for v in node.inputs):
            act.update(v.name for v in node.outputs)
            out.add(i)
    return out


def _build(rank, s: int, stage_of: list, readers: dict, parts: dict, block_range: range) -> Stage:
    graph = rank.graph
    mine = [i for i, st in enumerate(stage_of) if s in st]
    made = {v.name for i in mine for v in graph.nodes[i].outputs}
    producer_stage = {v.name: st for st, n in zip(stage_of, graph.nodes) for v in n.outputs}
    out = Graph()
    out.name = f"{graph.name}[stage {s}]"
    stage = Stage(s, out, 0, block_range)
    inputs_by_name = {v.name: v for v in graph.inputs}
    for i in mine:
        node = graph.nodes[i]
        for v in node.inputs:
            if v is None or v.name in made or v.name in out._names:
                continue
            if v.name in graph.parameters:
                out.parameters[v.name] = v
                out.tensors[v.name] = graph.tensors[v.name]
            elif v.name in graph.constants:
                out.constants[v.name] = v
                out.tensors[v.name] = graph.tensors[v.name]
            elif v.name in inputs_by_name:
                out.inputs.append(v)
            else:  # made by another stage
                src = min(producer_stage[v.name])
                if v.name in parts:
                    stage.shared.setdefault(parts[v.name], set()).update({s, src})
                else:
                    stage.recvs.append((v, v.nbytes, "backward" if i >= rank.n_forward else "forward"))
                out.inputs.append(v)
            out._names.add(v.name)
        out.nodes.append(node)
        stage.origin.append(i)
        if i < rank.n_forward:
            stage.n_forward = len(out.nodes)
    outputs = []
    sent = set()
    for i in mine:
        for v in graph.nodes[i].outputs:
            # a node several stages run (one that reads no activation: rotary tables from
            # positions) is sent to none of them; each makes its own
            if readers.get(v.name, set()) - stage_of[i] and v.name not in sent:
                sent.add(v.name)
                outputs.append(v)
                if v.name not in parts:
                    stage.sends.append((v, v.nbytes, "backward" if i >= rank.n_forward else "forward"))
    for v in graph.outputs:
        if v.name in made and v.name not in sent:
            outputs.append(v)
    out.outputs = outputs
    out.output_tree = {"tuple": list(range(len(outputs)))}
    return stage


def _reader_stages(graph, stage_of: list) -> dict:
    """Value name -> the stages whose nodes read it."""
    table: dict = {}
    for j, n in enumerate(graph.nodes):
        for u in n.inputs:
            if u is not None:
                table.setdefault(u.name, set()).update(stage_of[j])
    return table


def _gradient_parts(rank) -> dict:
    """Value name -> the parameter whose gradient it is part of: the values each gradient
    output sums up (through adds, and the views a Conv1D-style weight takes), each holding as
    many elements as the parameter."""
    graph = rank.graph
    table: dict = {}
    producer = {v.name: n for n in graph.nodes for v in n.outputs}
    for param, grad in rank.gradients.items():
        size = graph.parameters[param].numel() if param in graph.parameters else None
        frontier = [grad]
        while frontier:
            name = frontier.pop()
            if name in table:
                continue
            table[name] = param
            node = producer.get(name)
            if node is None or node.op.name not in ("add", "permute", "reshape"):
                continue
            frontier += [u.name for u in node.inputs if u is not None and u.numel() == size]
    return table
