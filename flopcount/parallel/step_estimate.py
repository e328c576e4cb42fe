"""Step time on a hardware profile: rooflines of the ops, collectives at their links' bandwidth,
and the 1F1B pipeline's bubble.

Ranks are laid out as Megatron lays them out: tensor-parallel ranks next to each other, then
data-parallel, then pipeline stages. A group that fits in one node talks over the node's links
(NVLink), one that spans nodes over each device's share of the network. A collective takes
its bytes sent over that bandwidth; an op takes its roofline time (``hardware.roofline``: the
larger of its compute and its memory traffic at peak). Nothing overlaps: communication and
computation add up, so the estimate is a bound on what overlap would give, and with every op at
its roofline it is optimistic about compute; a measured step time (``step_time``) replaces it.

1F1B (Narayanan et al. 2021): with p stages and m micro-batches a step takes (m + p − 1)
micro-batch slots of the slowest stage; the p − 1 extra ones are the bubble.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..hardware import roofline
from ..runtime.ops.boxing import CommCost


@dataclass(frozen=True)
class Links:
    """The bandwidth (bytes/s per device) each mesh axis' collectives run at."""

    dp: float
    tp: float
    pp: float

    def of(self, axis: str) -> float:
        return getattr(self, axis)


def links(hardware, data: int, tensor: int) -> Links:
    """Which link each axis uses, from the layout tensor < data < pipeline (the next pipeline
    stage sits one tensor x data group away, whatever the number of stages)."""
    per_node = hardware.devices_per_node
    intra, inter = hardware.intra_node_bandwidth, hardware.inter_node_bandwidth

    def within(span: int) -> float:
        return intra if span <= per_node else inter

    return Links(dp=within(tensor * data), tp=within(tensor), pp=within(tensor * data * 2))


def node_time(node, hardware, dtype) -> float:
    """Roofline seconds of one op; a boxing node's time is priced as traffic instead."""
    cost = node.cost()
    if isinstance(cost, CommCost):
        return 0.0
    return roofline(cost, hardware, dtype).time_s


def traffic_time(traffic: list, link: Links) -> float:
    """Seconds the collectives of ``traffic`` take, each at its axis' bandwidth."""
    return sum(t.sent / link.of(t.axis) for t in traffic)


def pipeline_step(slot: float, micro_batches: int, stages: int) -> tuple:
    """(step seconds, bubble seconds) of 1F1B with the slowest stage taking ``slot`` seconds
    per micro-batch (forward and backward)."""
    bubble = (stages - 1) * slot
    return micro_batches * slot + bubble, bubble
