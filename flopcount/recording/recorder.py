"""Module hooks and one dispatcher observer that only *store* what a run does.

Nothing is priced while the model runs: a module call keeps the specs (shape, dtype, device)
of its positional and keyword inputs and of its output and the range of op events inside it
(an input computed from constants only keeps a ``ConstantSpec``); an op event
keeps its op, specs, attrs, the call it ran in, its phase and the ids of its tensors. Specs
replace tensors so the run's activations are freed as usual. Costs are computed afterwards
(``analysis.py``).
"""

from __future__ import annotations

import contextlib
import weakref
from typing import Iterator

from ..conventions.base import ConstantSpec
from ..runtime import nn
from ..runtime.dispatch import observe
from ..runtime.nn.parameter import Parameter
from ..runtime.registry import Spec
from ..runtime.tensor import Tensor


def snapshot(value, spec=None):
    """``value`` with every Tensor replaced by its Spec (tuples, lists and dicts walked);
    ``spec(tensor)`` makes the spec when given."""
    if isinstance(value, Tensor):
        return spec(value) if spec is not None else Spec(value.shape, value.dtype, value.device)
    if isinstance(value, (tuple, list)):
        return tuple(snapshot(v, spec) for v in value)
    if isinstance(value, dict):
        return {k: snapshot(v, spec) for k, v in value.items()}
    return value


class Call:
    """One call of a module: its path, parent call, input/output specs and its op events."""

    __slots__ = ("path", "module", "parent", "inputs", "kwargs", "input_serials", "output", "start", "end")

    def __init__(self, path: str, module, parent: int, inputs, start: int):
        self.path = path
        self.module = module
        self.parent = parent          # index of the calling Call, -1 for the outermost
        self.inputs = inputs
        self.kwargs = {}              # keyword inputs, as specs
        self.input_serials = []       # op outputs passed in: the caller holds them to the end
        self.output = None
        self.start = start            # events[start:end] ran inside this call (subtree)
        self.end = start


class Event:
    """One dispatched op, with specs instead of tensors; ``input_ids``/``output_ids`` are the
    serial numbers of the op outputs involved (``None`` for inputs, parameters, constants)."""

    __slots__ = ("op", "inputs", "outputs", "attrs", "call", "path", "phase", "elapsed", "input_ids",
                 "output_ids", "param_elems", "param_bytes", "taped", "constant", "clock")

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
        self.constant = False         # computed from constants only: a graph folds it away
        self.clock = None

    @property
    def output_spec(self):
        return self.outputs if len(self.outputs) > 1 else self.outputs[0]


class Recorder:
    """Records calls (global module hooks) and op events (an observer) of one model."""

    def __init__(self, model, inputs=(), timing: bool = False, clock=None, index=None):
        """``index`` (a ModelIndex) saves walking ``model`` again; with it ``model`` may be
        None (a graph run: op events only, no module calls)."""
        from .params import ModelIndex

        index = index or ModelIndex(model)
        self.paths = index.paths
        # the model's inputs, parameters and buffers live through the run: their ids are stable
        self.roots = {id(t) for t in index.params + index.buffers + list(inputs)}
        # op outputs get a serial number while alive (ids are reused once a tensor dies)
        self.live: dict = {}          # id(tensor) -> (serial, weakref)
        self.next_serial = 0
        # serials of outputs that depend on the roots; an op with no such input works on
        # constants only (a causal mask, position ids)
        self.dependent: set = set()
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
        call = Call(path, module, parent, snapshot(args, self.spec), len(self.events))
        call.input_serials = self._serials(args)
        self.calls.append(call)
        return None

    def post_hook(self, module, args, kwargs, output):
        if id(module) not in self.paths or not self.stack:
            return None
        call = self.calls[self.stack.pop()]
        if kwargs:
            call.kwargs = snapshot(kwargs, self.spec)
            call.input_serials += self._serials(kwargs.values())
        call.output = snapshot(output)
        call.end = len(self.events)
        return None

    def spec(self, t) -> Spec:
        """A module input's spec: a ConstantSpec when it is computed from constants only."""
        entry = self.live.get(id(t))
        depends = entry[0] in self.dependent if entry is not None else id(t) in self.roots
        return (Spec if depends else ConstantSpec)(t.shape, t.dtype, t.device)

    def _serials(self, values) -> list:
        return [s for s in (self.serial(t) for t in values if isinstance(t, Tensor)) if s is not None]

    # --- observer -------------------------------------------------------------------------
    def serial(self, t) -> int | None:
        """The serial number of a live op output (``None`` for inputs, parameters, constants)."""
        entry = self.live.get(id(t))
        return None if entry is None else entry[0]

    def _new_serial(self, t) -> int:
        key, serial = id(t), self.next_serial
        self.next_serial += 1
        self.live[key] = (serial, weakref.ref(t, lambda _, key=key: self.live.pop(key, None)))
        return serial

    def on_op(self, event) -> None:
        ids_in, specs_in = [], []
        param_elems = param_bytes = 0
        dependent, roots, live = self.dependent, self.roots, self.live
        depends = event.op.random
        for t in event.inputs:
            if t is None:
                ids_in.append(None)
                specs_in.append(None)
                continue
            entry = live.get(id(t))
            serial = None if entry is None else entry[0]
            ids_in.append(serial)
            depends = depends or (serial in dependent if serial is not None else id(t) in roots)
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
        serials = [self._new_serial(t) for t in outs]
        rec = Event(event.op, tuple(specs_in), tuple(Spec(t.shape, t.dtype, t.device) for t in outs),
                    event.attrs, call, path, event.phase, event.elapsed, ids_in, serials,
                    param_elems, param_bytes)
        rec.taped = forward and bool(outs) and outs[0].requires_grad
        rec.constant = forward and not depends
        if depends:
            dependent.update(serials)
        if self.clock is not None:
            rec.clock = self.clock()
        self.events.append(rec)

    @contextlib.contextmanager
    def attached(self) -> Iterator["Recorder"]:
        """Hooks and observer in place for the block; all removed afterwards, also on error."""
        try:
            with nn.register_module_forward_pre_hook(self.pre_hook), \
                    nn.register_module_forward_hook(self.post_hook, with_kwargs=True), observe(self):
                yield self
        finally:
            self.stack.clear()
