"""Module hooks and one dispatcher observer that only *store* what a run does.

Nothing is priced while the model runs: a module call keeps the specs (shape, dtype, device)
of its positional inputs and of its output and the range of op events inside it; an op event
keeps its op, specs, attrs, the call it ran in, its phase and the ids of its tensors. Specs
replace tensors so the run's activations are freed as usual. Costs are computed afterwards
(``analysis.py``).
"""

from __future__ import annotations

import contextlib
from typing import Iterator

from ..runtime import nn
from ..runtime.dispatch import observe
from ..runtime.nn.parameter import Parameter
from ..runtime.registry import Spec
from ..runtime.tensor import Tensor


def snapshot(value):
    """``value`` with every Tensor replaced by its Spec (tuples, lists and dicts walked)."""
    if isinstance(value, Tensor):
        return Spec(value.shape, value.dtype, value.device)
    if isinstance(value, (tuple, list)):
        return tuple(snapshot(v) for v in value)
    if isinstance(value, dict):
        return {k: snapshot(v) for k, v in value.items()}
    return value


class Call:
    """One call of a module: its path, parent call, input/output specs and its op events."""

    __slots__ = ("path", "module", "parent", "inputs", "output", "start", "end")

    def __init__(self, path: str, module, parent: int, inputs, start: int):
        self.path = path
        self.module = module
        self.parent = parent          # index of the calling Call, -1 for the outermost
        self.inputs = inputs
        self.output = None
        self.start = start            # events[start:end] ran inside this call (subtree)
        self.end = start


class Event:
    """One dispatched op, with specs instead of tensors."""

    __slots__ = ("op", "inputs", "outputs", "attrs", "call", "path", "phase", "elapsed", "input_ids",
                 "output_ids", "param_elems", "param_bytes", "taped", "clock")

    def __init__(self, op, inputs, outputs, attrs, call, path, phase, elapsed, input_ids, output_ids,
                 param_elems, param_bytes):
        self.op = op
        self.inputs = inputs
        self.outputs = outputs
        self.attrs = attrs
        self.call = call
        self.path = path
        self.phase = phase
        self.elapsed = elapsed
        self.input_ids = input_ids
        self.output_ids = output_ids
        self.param_elems = param_elems
        self.param_bytes = param_bytes
        self.taped = False            # autograd recorded a node: its tensors wait for backward
        self.clock = None

    @property
    def output_spec(self):
        return self.outputs if len(self.outputs) > 1 else self.outputs[0]


class Recorder:
    """Records calls (global module hooks) and op events (an observer) of one model."""

    def __init__(self, model, timing: bool = False, clock=None):
        self.paths = {id(m): name for name, m in model.named_modules()}
        self.calls: list[Call] = []
        self.events: list[Event] = []
        self.stack: list[int] = []
        self.timing = timing          # asks the dispatcher for per-op elapsed time
        self.clock = clock            # when set, events keep the time they ended (trace)

    # --- module hooks ---------------------------------------------------------------------
    def pre_hook(self, module, args):
        path = self.paths.get(id(module))
        if path is None:
            return None  # a module outside the model's tree: its ops go to the caller
        parent = self.stack[-1] if self.stack else -1
        self.stack.append(len(self.calls))
        self.calls.append(Call(path, module, parent, snapshot(args), len(self.events)))
        return None

    def post_hook(self, module, args, output):
        if id(module) not in self.paths or not self.stack:
            return None
        call = self.calls[self.stack.pop()]
        call.output = snapshot(output)
        call.end = len(self.events)
        return None

    # --- observer -------------------------------------------------------------------------
    def on_op(self, event) -> None:
        ids_in, specs_in = [], []
        param_elems = param_bytes = 0
        for t in event.inputs:
            if t is None:
                ids_in.append(None)
                specs_in.append(None)
                continue
            ids_in.append(id(t))
            specs_in.append(Spec(t.shape, t.dtype, t.device))
            if type(t) is Parameter:
                n = t.numel()
                param_elems += n
                param_bytes += n * t.dtype.itemsize
        outs = event.outputs
        forward = event.phase == "forward"
        if forward:
            call = self.stack[-1] if self.stack else -1
            path = self.calls[call].path if call >= 0 else ""
        else:
            call = -1
            path = self.paths.get(id(event.module), "")
        rec = Event(event.op, tuple(specs_in), tuple(Spec(t.shape, t.dtype, t.device) for t in outs),
                    event.attrs, call, path, event.phase, event.elapsed, ids_in, [id(t) for t in outs],
                    param_elems, param_bytes)
        rec.taped = forward and bool(outs) and outs[0].requires_grad
        if self.clock is not None:
            rec.clock = self.clock()
        self.events.append(rec)

    @contextlib.contextmanager
    def attached(self) -> Iterator["Recorder"]:
        """Hooks and observer in place for the block; all removed afterwards, also on error."""
        pre = nn.register_module_forward_pre_hook(self.pre_hook)
        try:
            post = nn.register_module_forward_hook(self.post_hook)
            try:
                with observe(self):
                    yield self
            finally:
                post.remove()
        finally:
            pre.remove()
            self.stack.clear()
