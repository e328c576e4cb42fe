"""Activation memory of a recorded run: predicted by liveness, measured by the backend.

Prediction walks the op events in order. Every op output that the op writes (its cost rule has
bytes written) is a new buffer; a view (an op that moves no bytes: reshape, transpose,
expand...) shares its input's buffer. A buffer lives from the op that writes it to the last
op that reads it or a view of it; the model's outputs live to the end. The peak is the largest
sum of live buffers at any op. Parameters, buffers and the model's inputs are not activations.

For a training step, autograd keeps the inputs and outputs of every taped op until the backward
pass reaches it: the prediction is every such buffer, plus the parameters' gradients, plus the
largest working set of gradients alive at once during the backward pass.
"""

from __future__ import annotations

from ..runtime.registry import nbytes


class _Buffer:
    __slots__ = ("size", "start", "last", "saved")

    def __init__(self, size: int, start: int):
        self.size = size
        self.start = start
        self.last = start
        self.saved = False


def _liveness(events, own_costs, phase: str, keep_ids=(), mark_saved: bool = False) -> list:
    """Buffers (size, first and last op index) of the ops of ``phase``, in event order."""
    where: dict = {}
    buffers: list = []
    index = -1
    for e, cost in zip(events, own_costs):
        if e.phase != phase:
            continue
        index += 1
        inputs = [where.get(i) for i in e.input_ids if i is not None]
        for b in inputs:
            if b is not None:
                b.last = index
        view = cost.bytes_written == 0 and cost.bytes_read == 0
        base = next((b for b in inputs if b is not None), None)
        for out_id, spec in zip(e.output_ids, e.outputs):
            if view:
                if base is not None:
                    where[out_id] = base
                else:
                    where.pop(out_id, None)
                continue
            b = _Buffer(nbytes(spec), index)
            buffers.append(b)
            where[out_id] = b
        if mark_saved and e.taped:
            for b in inputs:
                if b is not None:
                    b.saved = True
            for out_id in e.output_ids:
                b = where.get(out_id)
                if b is not None:
                    b.saved = True
    end = index
    for i in keep_ids:
        b = where.get(i)
        if b is not None:
            b.last = end
    return buffers


def _peak(buffers: list) -> int:
    if not buffers:
        return 0
    n = max(b.last for b in buffers) + 2
    delta = [0] * n
    for b in buffers:
        delta[b.start] += b.size
        delta[b.last + 1] -= b.size
    live = peak = 0
    for d in delta:
        live += d
        peak = max(peak, live)
    return peak


def predicted_peak(events, own_costs, output_ids=()) -> int:
    """Peak bytes of activations alive at once during the forward pass (inference)."""
    return _peak(_liveness(events, own_costs, "forward", keep_ids=output_ids))


def predicted_training_peak(events, own_costs, grad_bytes: int, output_ids=()) -> int:
    """Forward buffers autograd keeps + parameter gradients + the backward working set."""
    forward = _liveness(events, own_costs, "forward", keep_ids=output_ids, mark_saved=True)
    saved = sum(b.size for b in forward if b.saved)
    unsaved_peak = _peak([b for b in forward if not b.saved])
    backward_peak = _peak(_liveness(events, own_costs, "backward"))
    return saved + max(unsaved_peak, grad_bytes + backward_peak)
