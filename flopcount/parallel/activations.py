"""The activations a stage keeps for its backward pass, under each recomputation mode.

What is kept is read off the stage's training graph, not assumed: a liveness analysis of the
graph (forward nodes, then backward nodes) gives every storage a forward node makes and the
backward still reads; those are the activations saved for backward (views share their source's
storage, so q, k and v sliced out of one projection count once, as that projection's output).

* ``none``: all of them.
* ``selective`` (Korthikanti et al. 2022): the attention-score tensors are not kept but
  recomputed from the q and k the backward keeps anyway: every forward value shaped
  (..., L, L) for the model's sequence length L (the scores, their softmax, its dropout mask
  and output), and the forward nodes that make them are run again.
* ``full``: each repeated block (transformer layer) keeps only its inputs and runs its forward
  again before its backward; what lies outside the blocks (embeddings, head) keeps its own.
  While one block's backward runs, that block's recomputed activations are alive too.

    >>> MODES
    ('none', 'selective', 'full')
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..runtime.errors import ShapeError
from ..runtime.graph.passes.liveness import liveness

MODES = ("none", "selective", "full")


@dataclass
class Activations:
    """A stage's activation memory for one micro-batch and the work recomputation adds.

    ``saved``: bytes kept from the forward for the backward; ``per_block``: block index ->
    bytes its backward reads (Korthikanti's "per layer" figure); ``working``: bytes alive at
    the peak beyond the saved ones (temporaries of the backward, a recomputed block);
    ``recomputed``: indices of the stage's forward nodes run again before the backward."""

    mode: str
    saved: int
    per_block: dict = field(default_factory=dict)
    working: int = 0
    recomputed: set = field(default_factory=set)


def stage_activations(stage, blocks, mode: str, seq_len: int | None) -> Activations:
    """The activations of ``stage`` (a ``pipeline.Stage``) under recomputation ``mode``."""
    if mode not in MODES:
        raise ShapeError(f"recompute must be one of {MODES}, got {mode!r}")
    graph, n_fwd = stage.graph, stage.n_forward
    lv = liveness(graph)
    producer = {v.name: i for i, n in enumerate(graph.nodes) for v in n.outputs}
    readers_bwd: dict = {}
    for j in range(n_fwd, len(graph.nodes)):
        for v in graph.nodes[j].inputs:
            if v is not None:
                readers_bwd.setdefault(lv.storage.get(v.name, v.name), set()).add(j)
    saved = {}  # storage owner -> bytes, for storages made in the forward (or received) and read later
    for owner in lv.activations:
        b, d = lv.intervals[owner]
        if b < n_fwd <= d:
            saved[owner] = lv.storage_bytes[owner]
    received = {v.name for v in graph.inputs}
    for v in graph.inputs:  # a received activation the backward reads is kept too
        if v.name in readers_bwd and v.dtype.is_floating_point:
            saved[v.name] = v.nbytes
    block_of = {i: blocks.index_of(graph.nodes[i].scope) for i in range(len(graph.nodes))}
    per_block: dict = {}
    for owner, size in saved.items():
        users = {block_of[j] for j in readers_bwd.get(owner, ())} - {None}
        for b in users:
            per_block[b] = per_block.get(b, 0) + size
    none_total = sum(saved.values())
    working = max(lv.peak_bytes - none_total, 0)
    if mode == "none":
        return Activations(mode, none_total, per_block, working)
    if mode == "selective":
        redo = {i for i in range(n_fwd) if _score_shaped(graph.nodes[i], seq_len)}
        dropped = {lv.storage[v.name] for i in redo for v in graph.nodes[i].outputs}
        kept = {o: s for o, s in saved.items() if o not in dropped}
        per_block = {b: sum(s for o, s in kept.items() if b in {block_of[j] for j in readers_bwd.get(o, ())})
                     for b in per_block}
        return Activations(mode, sum(kept.values()), per_block, working, redo)
    # full: every block keeps the activations it reads from outside itself
    redo = {i for i in range(n_fwd) if block_of[i] is not None}
    made_in = {lv.storage.get(v.name, v.name): block_of[producer[v.name]] if v.name in producer else None
               for n in graph.nodes for v in n.outputs}
    kept, per_block_full, inner = {}, {}, {}
    for owner, size in saved.items():
        if made_in.get(owner) is None:  # made outside every block (or received): kept as it is
            kept[owner] = size
        else:
            inner[made_in[owner]] = inner.get(made_in[owner], 0) + size
    for i in redo:
        b = block_of[i]
        for v in graph.nodes[i].inputs:
            if v is None:
                continue
            owner = lv.storage.get(v.name, v.name)
            from_outside = made_in.get(owner, None) != b
            is_activation = owner in lv.activations or owner in received
            if from_outside and is_activation and v.dtype.is_floating_point:
                size = lv.storage_bytes.get(owner) or v.nbytes
                if owner not in kept:
                    kept[owner] = size
                per_block_full.setdefault(b, {})[owner] = size
    per_block = {b: sum(sizes.values()) for b, sizes in per_block_full.items()}
    return Activations(mode, sum(kept.values()), per_block, working + max(inner.values(), default=0), redo)


def _score_shaped(node, seq_len) -> bool:
    """Whether a node makes an attention-score tensor: its output's last two dims are both the
    sequence length."""
    if seq_len is None or node.op.name in _BOXING:
        return False
    return any(v.ndim >= 2 and v.shape[-1] == v.shape[-2] == seq_len for v in node.outputs)


_BOXING = {"all_reduce", "reduce_scatter", "all_gather", "all_to_all", "send_recv", "local_slice", "to_partial"}
