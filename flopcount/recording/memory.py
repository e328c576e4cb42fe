"""Activation memory of a recorded run: predicted by liveness, measured by the backend.

Prediction walks the op events in order. Every op output is a new buffer, except a view, which
shares its input's buffer: each op says when its output is one (``Op.view``, read by the graph's
liveness too: permute, expand and basic indexing always, reshape and contiguous of a contiguous
tensor). A buffer lives from the op that writes it to the last
op that reads it or a view of it, and at least until every module call it was passed to has
returned (the calling frame holds its argument); the model's outputs live to the end. The peak is the largest
sum of live buffers at any op. Parameters, buffers and the model's inputs are not activations.

For a training step, autograd keeps the inputs and outputs of every taped op until the backward
pass reaches it: the prediction is every such buffer, plus the gradients alive at once during
the backward pass, where a gradient no later op reads (a parameter's ``.grad``) stays to the
end, from the op that makes it: the last layers' gradients come first.

Before a model runs for real (for its latency, its measured memory, or a training step),
``predict_before_running`` runs the same step with shape rules only (``dispatch.shapes_only``)
and ``refuse_if_too_big`` compares that prediction with the memory the device has left: a run
that would not fit is refused with the predicted figure instead of dying halfway.
"""

from __future__ import annotations

from math import prod

from ..runtime.dispatch import shapes_only
from ..runtime.graph.tree import tensor_leaves
from ..runtime.host_memory import check_fits
from ..runtime.registry import COPY, STRIDED


class _Buffers:
    """The buffers of one phase, in the order they were written: parallel lists of size,
    first op index, last op index and whether autograd keeps them (one list per field, not
    one object per buffer: a model writes thousands)."""

    __slots__ = ("size", "start", "last", "saved")

    def __init__(self):
        self.size: list = []
        self.start: list = []
        self.last: list = []
        self.saved: list = []

    def add(self, size: int, start: int, last: int, saved: bool = False) -> int:
        self.size.append(size)
        self.start.append(start)
        self.last.append(last)
        self.saved.append(saved)
        return len(self.size) - 1


def _aliasing(e, strided: set) -> str:
    """COPY, VIEW or STRIDED: what the op's ``view`` rule says of the event's output (the
    model's inputs, parameters and constants count as contiguous)."""
    rule = e.op.view
    if rule is None or not e.inputs or e.inputs[0] is None or len(e.outputs) != 1:
        return COPY
    return rule(e.input_ids[0] not in strided, e.inputs[0], e.outputs[0], **e.attrs)


def _liveness(events, phase: str, keep_ids=(), mark_saved: bool = False, holds=()) -> _Buffers:
    """Buffers (size, first and last op index) of the ops of ``phase``, in event order.
    ``holds`` are (serial, op index) pairs: a tensor some frame keeps until that op."""
    where: dict = {}
    strided: set = set()  # op outputs that are views but not contiguous
    buffers = _Buffers()
    sizes, starts, last, saved = buffers.size, buffers.start, buffers.last, buffers.saved
    index = -1
    for e in events:
        if e.phase != phase:
            continue
        index += 1
        inputs = []
        for i in e.input_ids:
            if i is not None:
                b = where.get(i)
                if b is not None:
                    last[b] = index
                    inputs.append(b)
        alias = _aliasing(e, strided)
        if alias != COPY:  # a view: shares input 0's buffer (none: held outside the run)
            src = e.input_ids[0]
            base = where.get(src) if src is not None else None
            for out_id in e.output_ids:
                if base is not None:
                    where[out_id] = base
                else:
                    where.pop(out_id, None)
                if alias == STRIDED:
                    strided.add(out_id)
        else:
            for out_id, spec in zip(e.output_ids, e.outputs):
                where[out_id] = len(sizes)
                sizes.append(spec.dtype.nbytes(prod(spec.shape)))
                starts.append(index)
                last.append(index)
                saved.append(False)
        if mark_saved and e.taped:
            for b in inputs:
                saved[b] = True
            for out_id in e.output_ids:
                b = where.get(out_id)
                if b is not None:
                    saved[b] = True
    end = index
    for i in keep_ids:
        b = where.get(i)
        if b is not None:
            last[b] = end
    for serial, until in holds:
        b = where.get(serial)
        if b is not None:
            last[b] = max(last[b], min(until, end))
    return buffers


def _peak(buffers: _Buffers) -> int:
    if not buffers.size:
        return 0
    delta = [0] * (max(buffers.last) + 2)
    for size, start, last in zip(buffers.size, buffers.start, buffers.last):
        delta[start] += size
        delta[last + 1] -= size
    live = peak = 0
    for d in delta:
        live += d
        if live > peak:
            peak = live
    return peak


def call_holds(calls) -> list:
    """(serial, last op index) for every tensor passed into a module call: the calling frame
    keeps its argument alive until the call returns, after the call's last op."""
    return [(serial, c.end - 1) for c in calls for serial in c.input_serials if c.end > c.start]


def predicted_peak(events, output_ids=(), holds=()) -> int:
    """Peak bytes of activations alive at once during the forward pass (inference)."""
    return _peak(_liveness(events, "forward", keep_ids=output_ids, holds=holds))


def _live_per_step(buffers: _Buffers, steps: int) -> list:
    delta = [0] * (steps + 2)
    for size, start, last in zip(buffers.size, buffers.start, buffers.last):
        delta[start] += size
        delta[min(last, steps) + 1] -= size
    live, out = 0, []
    for d in delta[:steps]:
        live += d
        out.append(live)
    return out


def predicted_training_peak(events, output_ids=(), holds=()) -> int:
    """The most bytes alive at once during forward + backward.

    Forward: the liveness of buffers no node keeps, plus every buffer a taped op touched so far.
    Backward walks the tape in reverse, so a kept buffer goes when the walk reaches the op that
    wrote it: with F forward and B backward ops, the buffer written by forward op s is released
    at backward op (F − s)·B/F. Alive with them: the gradients of the backward ops (liveness),
    those no later op reads (the parameters' ``.grad``) kept from the op that makes them to
    the end. (Spreading the parameters' gradients evenly over the walk put resnet18's peak 21%
    under the measured one: layer4 holds most of the parameters and is walked first.)
    """
    forward = _liveness(events, "forward", keep_ids=output_ids, mark_saved=True, holds=holds)
    backward = _liveness(events, "backward")
    n_fwd = sum(1 for e in events if e.phase == "forward")
    n_bwd = sum(1 for e in events if e.phase == "backward")
    for b, (start, last) in enumerate(zip(backward.start, backward.last)):
        if last == start:  # read by no later op: a leaf's gradient, held by .grad to the end
            backward.last[b] = n_bwd - 1
    during_forward, released = _Buffers(), _Buffers()
    for size, start, last, saved in zip(forward.size, forward.start, forward.last, forward.saved):
        if saved:  # kept to the end of the forward pass, released during backward
            during_forward.add(size, start, n_fwd - 1)
            released.add(size, 0, (n_fwd - start) * n_bwd // max(n_fwd, 1))
        else:
            during_forward.add(size, start, last)
    peak = max(_live_per_step(during_forward, n_fwd), default=0)
    if n_bwd == 0:
        return peak
    live_kept = _live_per_step(released, n_bwd)
    live_grads = _live_per_step(backward, n_bwd)
    for j in range(n_bwd):
        peak = max(peak, live_kept[j] + live_grads[j])
    return peak


def predict_before_running(step, recorder, training: bool, calls: bool = True) -> int | None:
    """The activation peak of ``step()`` (inference, or with ``training`` forward + backward),
    predicted from a run of the same ops on shapes only: nothing is computed or allocated.
    ``recorder`` is a fresh Recorder of the model (with ``calls``, its module calls hold their
    arguments, as in the eager view). None when the step cannot run on shapes alone (it reads a
    value: ``.item()``, a shape computed from data); the real run then goes ahead unchecked,
    and raises itself if the step is wrong."""
    try:
        with shapes_only(), recorder.attached(calls=calls):
            out = step()
        outputs = [recorder.serial(t) for t in tensor_leaves(out)]
    except Exception:  # noqa: BLE001 - whatever stops a shapes-only run, the real run decides
        return None
    holds = call_holds(recorder.calls) if calls else ()
    predict = predicted_training_peak if training else predicted_peak
    return predict(recorder.events, outputs, holds)


def refuse_if_too_big(peak: int | None, device, name: str, training: bool) -> None:
    """A MemoryLimitError naming the predicted peak when it does not fit in what ``device`` has
    left (nothing to check when the peak could not be predicted)."""
    if peak is None:
        return
    what = "a training step of" if training else "running"
    check_fits(peak, f"{what} {name} (activations at their predicted peak)",
               "count without latency, measured memory or a training step (shapes only), or use "
               "smaller inputs", device=device)
