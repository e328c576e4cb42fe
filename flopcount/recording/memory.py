"""Activation memory of a recorded run: predicted by liveness, measured by the backend.

Prediction walks the op events in order. Every op output is a new buffer, except a view, which
shares its input's buffer: each op says when its output is one (``Op.view``, read by the graph's
liveness too: permute, expand and basic indexing always, reshape and contiguous of a contiguous
tensor). A buffer lives from the op that writes it to the last
op that reads it or a view of it, and at least until every module call it was passed to has
returned (the calling frame holds its argument); the model's outputs live to the end. The peak is the largest
sum of live buffers at any op. The walk is the graph's liveness (``passes.liveness.StorageWalk``)
over the recorded events. Parameters, buffers and the model's inputs are not activations.

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

from ..runtime.dispatch import shapes_only
from ..runtime.graph.passes.liveness import Buffers, StorageWalk
from ..runtime.graph.tree import tensor_leaves
from ..runtime.host_memory import check_fits


def _liveness(events, phase: str, keep_ids=(), mark_saved: bool = False, holds=()) -> Buffers:
    """Storages (size, first and last op index) of the ops of ``phase``, in event order.
    ``holds`` are (serial, op index) pairs: a tensor some frame keeps until that op."""
    walk = StorageWalk()
    saved = walk.buffers.saved
    for e in events:
        if e.phase != phase:
            continue
        read = walk.step(e.op, e.attrs, list(zip(e.input_ids, e.inputs)), list(zip(e.output_ids, e.outputs)))
        if mark_saved and e.taped:
            for b in read:
                saved[b] = True
            for out_id in e.output_ids:
                b = walk.where.get(out_id)
                if b is not None:
                    saved[b] = True
    end = walk.steps - 1
    walk.keep(keep_ids, end)
    for serial, until in holds:
        walk.keep([serial], min(until, end))
    return walk.buffers


def call_holds(calls) -> list:
    """(serial, last op index) for every tensor passed into a module call: the calling frame
    keeps its argument alive until the call returns, after the call's last op."""
    return [(serial, c.end - 1) for c in calls for serial in c.input_serials if c.end > c.start]


def predicted_peak(events, output_ids=(), holds=()) -> int:
    """Peak bytes of activations alive at once during the forward pass (inference)."""
    forward = _liveness(events, "forward", keep_ids=output_ids, holds=holds)
    return max(forward.live_per_step(sum(1 for e in events if e.phase == "forward")), default=0)


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
    during_forward, released = Buffers(), Buffers()
    for size, start, last, saved in zip(forward.size, forward.start, forward.last, forward.saved):
        if saved:  # kept to the end of the forward pass, released during backward
            during_forward.add(size, start, n_fwd - 1)
            released.add(size, 0, (n_fwd - start) * n_bwd // max(n_fwd, 1))
        else:
            during_forward.add(size, start, last)
    peak = max(during_forward.live_per_step(n_fwd), default=0)
    if n_bwd == 0:
        return peak
    live_kept = released.live_per_step(n_bwd)
    live_grads = backward.live_per_step(n_bwd)
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
