"""Activation memory of a recorded run: predicted by liveness, measured by the backend.

Prediction walks the op events in order. Every op output that the op writes (its cost rule has
bytes written) is a new buffer; a view (an op that moves no bytes: reshape, transpose,
expand...) shares its input's buffer. A buffer lives from the op that writes it to the last
op that reads it or a view of it, and at least until every module call it was passed to has
returned (the calling frame holds its argument); the model's outputs live to the end. The peak is the largest
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


def _liveness(events, own_costs, phase: str, keep_ids=(), mark_saved: bool = False, holds=()) -> list:
    """Buffers (size, first and last op index) of the ops of ``phase``, in event order.
    ``holds`` are (serial, op index) pairs: a tensor some frame keeps until that op."""
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
    for serial, until in holds:
        b = where.get(serial)
        if b is not None:
            b.last = max(b.last, min(until, end))
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


def call_holds(calls) -> list:
    """(serial, last op index) for every tensor passed into a module call: the calling frame
    keeps its argument alive until the call returns, after the call's last op."""
    return [(serial, c.end - 1) for c in calls for serial in c.input_serials if c.end > c.start]


def predicted_peak(events, own_costs, output_ids=(), holds=()) -> int:
    """Peak bytes of activations alive at once during the forward pass (inference)."""
    return _peak(_liveness(events, own_costs, "forward", keep_ids=output_ids, holds=holds))


def _live_per_step(buffers: list, steps: int) -> list:
    delta = [0] * (steps + 2)
    for b in buffers:
        delta[b.start] += b.size
        delta[min(b.last, steps) + 1] -= b.size
    live, out = 0, []
    for d in delta[:steps]:
        live += d
        out.append(live)
    return out


def predicted_training_peak(events, own_costs, grad_bytes: int, output_ids=(), holds=()) -> int:
    """The most bytes alive at once during forward + backward.

    Forward: the liveness of buffers no node keeps, plus every buffer a taped op touched so far.
    Backward walks the tape in reverse, so a kept buffer goes when the walk reaches the op that
    wrote it: with F forward and B backward ops, the buffer written by forward op s is released
    at backward op (F − s)·B/F. Alive with them: the gradients of the backward ops (liveness)
    and the parameters' gradients, taken to accumulate evenly over the walk.
    """
    forward = _liveness(events, own_costs, "forward", keep_ids=output_ids, mark_saved=True, holds=holds)
    backward = _liveness(events, own_costs, "backward")
    n_fwd = sum(1 for e in events if e.phase == "forward")
    n_bwd = sum(1 for e in events if e.phase == "backward")
    saved = [b for b in forward if b.saved]
    kept = [_Buffer(b.size, b.start) for b in saved]
    for b in kept:
        b.last = n_fwd - 1
    peak = max(_live_per_step([b for b in forward if not b.saved] + kept, n_fwd), default=0)
    if n_bwd == 0:
        return peak
    released = [_Buffer(b.size, 0) for b in saved]
    for b, src in zip(released, saved):
        b.last = (n_fwd - src.start) * n_bwd // max(n_fwd, 1)
    live_kept = _live_per_step(released, n_bwd)
    live_grads = _live_per_step(backward, n_bwd)
    for j in range(n_bwd):
        peak = max(peak, live_kept[j] + live_grads[j] + grad_bytes * (j + 1) // n_bwd)
    return peak
