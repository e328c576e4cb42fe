"""The bytes a rank sends in one training step, by collective kind and mesh axis.

Three sources, all priced by the boxing ops' ring formulas (``runtime/ops/boxing.py``):

* inside every micro-batch, the boxing nodes of the rank's stage graph (tensor-parallel
  all-reduces, or sequence-parallel all-gathers and reduce-scatters), once more for the forward
  nodes that recomputation runs again, and the pipeline's sends of activations and their
  gradients;
* once per step (or per micro-batch where ZeRO needs it), the gradient reduction of the
  data-parallel ranks and ZeRO's gathers of the weights:
  ZeRO 0 all-reduces the gradients once; 1 reduce-scatters them once and all-gathers the
  updated weights; 2 reduce-scatters every micro-batch's gradients (each rank keeps only its
  part) and all-gathers the weights once; 3 also gathers the weights for every micro-batch's
  forward and backward;
* the gradients that a tensor axis leaves as partial sums (a norm's weights under sequence
  parallelism), all-reduced once, and those of parameters that two pipeline stages hold (a tied
  embedding), summed once across those stages.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..runtime.ops.boxing import CommCost


@dataclass(frozen=True)
class Traffic:
    """``count`` collectives of ``kind`` on ``axis`` in one step, moving ``what``; ``sent``:
    bytes one rank sends for all of them; ``group``: ranks taking part in each."""

    kind: str
    axis: str
    what: str
    count: int
    sent: int
    group: int


def ring_bytes(kind: str, size: int, n: int) -> int:
    """Bytes a rank sends for one collective over ``n`` ranks on a value of ``size`` bytes
    (the whole value: the reduced tensor, or the gathered one)."""
    if n <= 1:
        return 0
    if kind == "all_reduce":
        return 2 * (n - 1) * size // n
    if kind in ("all_gather", "reduce_scatter"):
        return (n - 1) * size // n
    return size


def stage_traffic(stage, activations, micro_batches: int) -> list:
    """The collectives inside the micro-batches of ``stage``: its boxing nodes, the forward ones
    again where recomputed, and its pipeline sends."""
    out: dict = {}
    for i, node in enumerate(stage.graph.nodes):
        cost = node.cost()
        if not isinstance(cost, CommCost) or cost.sent == 0:
            continue
        runs = 2 if i in activations.recomputed else 1
        key = (cost.kind, cost.axis, "activations" if i < stage.n_forward else "activation gradients")
        count, sent, group = out.get(key, (0, 0, node.attrs["n"]))
        out[key] = (count + runs * micro_batches, sent + runs * micro_batches * cost.sent, group)
    for value, size, phase in stage.sends:
        key = ("send_recv", "pp", "activations" if phase == "forward" else "activation gradients")
        count, sent, _ = out.get(key, (0, 0, 2))
        out[key] = (count + micro_batches, sent + micro_batches * size, 2)
    return [Traffic(k, a, w, c, s, g) for (k, a, w), (c, s, g) in out.items()]


def gradient_traffic(grad_bytes: int, weight_bytes: int, zero: int, data: int, micro_batches: int) -> list:
    """The data-parallel ranks' gradient reduction and ZeRO's weight gathers in one step, for a
    rank whose parameters' gradients take ``grad_bytes`` and weights ``weight_bytes`` before
    ZeRO partitions them."""
    if data <= 1:
        return []
    rs, ag, ar = "reduce_scatter", "all_gather", "all_reduce"
    if zero == 0:
        plan = [(ar, "gradients", 1, grad_bytes)]
    elif zero == 1:
        plan = [(rs, "gradients", 1, grad_bytes), (ag, "weights", 1, weight_bytes)]
    elif zero == 2:
        plan = [(rs, "gradients", micro_batches, grad_bytes), (ag, "weights", 1, weight_bytes)]
    else:
        plan = [(rs, "gradients", micro_batches, grad_bytes), (ag, "weights", 2 * micro_batches, weight_bytes)]
    return [Traffic(kind, "dp", what, count, count * ring_bytes(kind, size, data), data)
            for kind, what, count, size in plan if size]


def merge(traffic: list) -> list:
    """One record per (kind, axis, what), counts and bytes added, largest first."""
    out: dict = {}
    for t in traffic:
        key = (t.kind, t.axis, t.what)
        prev = out.get(key)
        out[key] = t if prev is None else Traffic(t.kind, t.axis, t.what, prev.count + t.count,
                                                  prev.sent + t.sent, t.group)
    return sorted(out.values(), key=lambda t: -t.sent)
