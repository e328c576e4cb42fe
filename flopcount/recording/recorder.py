"""A module-call observer and an op observer that only *store* what a run does.

Nothing is priced while the model runs: a module call keeps the specs (shape, dtype, device)
of its positional and keyword inputs and of its output and the range of op events inside it
(an input computed from constants only keeps a ``ConstantSpec``); an op event
keeps its op, specs, attrs, the call it ran in, its phase and the ids of its tensors. Specs
replace tensors so the run's activations are freed as usual. Costs are computed afterwards
(``analysis.py``).

The call and op observers run once per module call and per op, inside the measured run, so
they do as little as they can: an op output's Spec is made once, when the op returns, and
reused wherever the tensor appears again (as another op's input, a module's input or output);
a parameter's or buffer's Spec (and size) is made once per run; an event is a tuple.
"""

from __future__ import annotations

import contextlib
from collections import namedtuple
from math import prod
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

    def __init__(self, path: str, module, parent: int, inputs, start: int, input_serials=None):
        self.path = path
        self.module = module
        self.parent = parent          # index of the calling Call, -1 for the outermost
        self.inputs = inputs
        self.kwargs = {}              # keyword inputs, as specs
        # op outputs passed in: the caller holds them to the end
        self.input_serials = [] if input_serials is None else input_serials
        self.output = None
        self.start = start            # events[start:end] ran inside this call (subtree)
        self.end = start


_EventFields = namedtuple("_EventFields", (
    "op", "inputs", "outputs", "attrs", "call", "path", "phase", "elapsed", "input_ids", "output_ids",
    "param_elems", "param_bytes", "taped", "constant", "clock", "library"))


class Event(_EventFields):
    """One dispatched op, with specs instead of tensors; ``input_ids``/``output_ids`` are the
    serial numbers of the op outputs involved (a root, the model's input, parameter or buffer,
    has ``-1 - its index`` in ``Recorder.roots``; ``None`` is a constant).
    ``taped``: autograd recorded a node (its tensors wait for backward); ``constant``: computed
    from constants only (a graph folds it away); ``clock``: when it ended (trace), or None;
    ``library``: the path its kernel took on a GPU (``OpEvent.library``).

    A tuple: one is made per op while the model runs, and a tuple is the cheapest record.
    """

    __slots__ = ()

    @property
    def output_spec(self):
        return self.outputs if len(self.outputs) > 1 else self.outputs[0]


_new_event = tuple.__new__


class Recorder:
    """Records module calls (``observe_module_calls``) and op events (an observer) of one model."""

    def __init__(self, model, inputs=(), timing: bool = False, clock=None, index=None):
        """``index`` (a ModelIndex) saves walking ``model`` again; with it ``model`` may be
        None (a graph run: op events only, no module calls)."""
        from .params import ModelIndex

        index = index or ModelIndex(model)
        self.paths = index.paths
        # What the recorder knows of a tensor is its note on it (``Tensor._trace``): (this
        # recorder's token, serial, Spec, parameter elements, parameter bytes, depends on the
        # roots). A note lives and dies with its tensor, so reading it needs no lookup by id
        # and no check that an id was not reused; a note of another run has another token.
        # The roots (the model's parameters, buffers and inputs) are noted while the recorder
        # is attached (serial -1 - their index, so a graph of the run can name them); op outputs
        # when they are made. Outputs that do not depend on the roots come from constants only
        # (a causal mask, position ids).
        self.token = object()
        self.roots = index.params + index.buffers + list(inputs)
        self.next_serial = 0
        self.calls: list[Call] = []
        self.events: list[Event] = []
        self.stack: list[int] = []
        self.timing = timing          # asks the dispatcher for per-op elapsed time
        self.clock = clock            # when set, events keep the time they ended (trace)

    # --- what a tensor is ------------------------------------------------------------------
    def _entry(self, t):
        """The note on an op output of this run or on a root; None for any other tensor."""
        entry = t._trace
        return entry if entry is not None and entry[0] is self.token else None

    def serial(self, t) -> int | None:
        """The serial number of a live op output (negative for a root, ``None`` for a constant)."""
        entry = self._entry(t)
        return None if entry is None else entry[1]

    def spec(self, t) -> Spec:
        """A module input's spec: a ConstantSpec when it is computed from constants only."""
        entry = self._entry(t)
        if entry is not None and entry[5]:
            return entry[2]
        return ConstantSpec(t.shape, t.dtype, t.device)

    def _output_spec(self, t) -> Spec:
        """A module output's spec (the op output's own, when it is one)."""
        entry = self._entry(t)
        return entry[2] if entry is not None else Spec(t.shape, t.dtype, t.device)

    # --- module calls ----------------------------------------------------------------------
    def record_call(self, module, args: tuple, kwargs: dict):
        """Run ``module.forward`` and note the call around it (``observe_module_calls``): one
        Python call per module call, since this runs inside the measured run."""
        path = self.paths.get(id(module))
        if path is None:  # a module outside the model's tree: its ops go to the caller
            return module.forward(*args, **kwargs)
        stack, calls, token = self.stack, self.calls, self.token
        specs, serials = [], []
        for a in args:
            if not isinstance(a, Tensor):
                specs.append(snapshot(a, self.spec))
                continue
            entry = a._trace
            if entry is None or entry[0] is not token:
                specs.append(ConstantSpec(a.shape, a.dtype, a.device))
                continue
            specs.append(entry[2] if entry[5] else ConstantSpec(a.shape, a.dtype, a.device))
            if entry[1] >= 0:  # an op output (a root is held by its owner anyway)
                serials.append(entry[1])
        call = Call(path, module, stack[-1] if stack else -1, tuple(specs), len(self.events), serials)
        stack.append(len(calls))
        calls.append(call)
        try:
            output = module.forward(*args, **kwargs)
        finally:
            stack.pop()
        if kwargs:
            call.kwargs = snapshot(kwargs, self.spec)
            call.input_serials += [s for s in (self.serial(t) for t in kwargs.values() if isinstance(t, Tensor))
                                   if s is not None and s >= 0]
        call.output = self._output_spec(output) if isinstance(output, Tensor) else snapshot(output, self._output_spec)
        call.end = len(self.events)
        return output

    # --- observer -------------------------------------------------------------------------
    def on_op(self, event) -> None:
        token = self.token
        ids_in, specs_in = [], []
        param_elems = param_bytes = 0
        depends = event.op.random
        for t in event.inputs:
            if t is None:
                ids_in.append(None)
                specs_in.append(None)
                continue
            entry = t._trace
            if entry is None or entry[0] is not token:
                # made outside the dispatcher, not the model's: a constant
                ids_in.append(None)
                specs_in.append(Spec(t.shape, t.dtype, t.device))
                if type(t) is Parameter:  # another model's parameter, still read
                    n = t.numel()
                    param_elems += n
                    param_bytes += t.dtype.nbytes(n)
                continue
            ids_in.append(entry[1])
            specs_in.append(entry[2])
            if entry[3]:
                param_elems += entry[3]
                param_bytes += entry[4]
            if entry[5]:
                depends = True
        outs = event.outputs
        serials, specs_out = [], []
        serial = self.next_serial
        for t in outs:
            spec = Spec(t.shape, t.dtype, t.device)
            t._trace = (token, serial, spec, 0, 0, depends)
            serials.append(serial)
            specs_out.append(spec)
            serial += 1
        self.next_serial = serial
        phase = event.phase
        if phase == "forward":
            stack = self.stack
            call = stack[-1] if stack else -1
            path = self.calls[call].path if call >= 0 else ""
            taped = bool(outs) and outs[0].requires_grad
            constant = not depends
        else:
            call = -1
            path = self.paths.get(id(event.module), "")
            taped = constant = False
        self.events.append(_new_event(Event, (
            event.op, tuple(specs_in), tuple(specs_out), event.attrs, call, path, phase, event.elapsed,
            ids_in, serials, param_elems, param_bytes, taped, constant,
            None if self.clock is None else self.clock(), event.library)))

    @contextlib.contextmanager
    def attached(self, calls: bool = True) -> Iterator["Recorder"]:
        """The roots noted, and ops (and with ``calls`` module calls) observed for the block;
        all let go afterwards, also on error."""
        token = self.token
        for k, t in enumerate(self.roots):
            n = prod(t.shape) if type(t) is Parameter else 0
            t._trace = (token, -1 - k, Spec(t.shape, t.dtype, t.device), n, t.dtype.nbytes(n), True)
        try:
            with nn.observe_module_calls(self) if calls else contextlib.nullcontext(), observe(self):
                yield self
        finally:
            self.stack.clear()
            for t in self.roots:
                t._trace = None
