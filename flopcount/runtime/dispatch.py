"""The one place an op runs.

``apply(op, *inputs, **attrs)``:
1. the shape rule gives the output specs (and rejects bad shapes, naming the op);
2. while tracing, the tracer records a graph node instead; on the meta device, or for any
   device inside ``shapes_only()``, stop here (the output is a meta tensor);
3. the kernel for the inputs' device runs (on operands widened to a dtype the backend computes
   in, when it has no arithmetic for theirs: bfloat16 on numpy runs in float32);
4. autograd records a node when grad mode is on and an input requires grad;
5. the active observers get an ``OpEvent``.

With no observer, step 5 costs one truth test of an empty tuple.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Iterator

from .device import CPU, META, Device, backend, device as parse_device
from .errors import DeviceError


class _State(threading.local):
    """The runtime state of one run: per thread, as PyTorch keeps grad mode and its dispatch state.

    Observers, grad mode, the tracer, the scope stack, graph mode and the default device belong
    to the code that set them: a profile running in one thread must not see another thread's
    ops, and a trace must not record them. Each thread starts from these defaults (``__init__`` runs once
    per thread on its first access). One object, so the hot path does one global lookup.
    """

    def __init__(self):
        self.grad_enabled = True
        self.observers: tuple = ()
        self.timing = False          # some observer asked for per-op elapsed time
        self.tracer = None           # the active graph tracer, if any
        self.scope_stack: list = []  # modules (or str names) currently running, innermost last
        self.phase = "forward"       # "backward" while autograd runs the tape
        self.default_device: Device = CPU
        self.backward_module = None  # module that made the node whose gradient is being run
        self.call_observer = None    # runs every module call (nn.observe_module_calls), if any
        self.shapes_only = False     # every op runs as on the meta device (``shapes_only()``)
        self.graph_mode_call = None  # runs top-level module calls in graph mode (graph.set_mode)


state = _State()


class OpEvent:
    """What observers hear about one op. ``cost`` is computed on first access only; ``library``
    names the path its kernel took on a GPU ("cuBLAS", "own kernel", "CuPy"; None on the CPU)."""

    __slots__ = ("op", "inputs", "outputs", "attrs", "module", "phase", "elapsed", "library", "_cost")

    def __init__(self, op, inputs, outputs, attrs, module, phase, elapsed, library=None):
        self.op = op
        self.inputs = inputs
        self.outputs = outputs
        self.attrs = attrs
        self.module = module
        self.phase = phase
        self.elapsed = elapsed
        self.library = library
        self._cost = None

    @property
    def cost(self):
        if self._cost is None:
            self._cost = self.op.cost(self.outputs if len(self.outputs) > 1 else self.outputs[0],
                                      *self.inputs, **self.attrs)
        return self._cost


def current_module():
    """The innermost running module (or named scope), or None at top level."""
    if state.phase == "backward":
        return state.backward_module
    stack = state.scope_stack
    return stack[-1] if stack else None


def _common_device(op, inputs, attrs) -> Device:
    dev = None
    for t in inputs:
        if t is None:
            continue
        d = t.device
        if dev is None:
            dev = d
        elif d is not dev and d != dev:
            shapes = ", ".join(f"{tuple(t.shape)}@{t.device}" for t in inputs if t is not None)
            raise DeviceError(f"op '{op.name}': inputs are on different devices ({shapes})")
    if dev is None:
        dev = parse_device(attrs["device"]) if attrs.get("device") is not None else state.default_device
    return dev


def apply(op, *inputs, **attrs):
    """Run ``op`` on ``inputs`` (Tensors or None) and return a Tensor or a tuple of Tensors."""
    st = state
    if st.tracer is not None:
        return st.tracer.record(op, inputs, attrs)
    spec = op.shape(*inputs, **attrs)
    dev = META if st.shapes_only else _common_device(op, inputs, attrs)
    multi = isinstance(spec, tuple)
    elapsed = library = None
    if dev.type == "meta":
        outs = tuple(Tensor._make(None, s.shape, s.dtype, META) for s in spec) if multi \
            else (Tensor._make(None, spec.shape, spec.dtype, META),)
    else:
        be = backend(dev)
        kernel = op._kernel_by_device[dev.type]
        arrays = [None if t is None else t.data for t in inputs]
        if op.computes:
            wide = be.compute_dtypes
            for t in inputs:
                if t is not None and t.dtype in wide:
                    arrays = _widened(arrays, inputs, wide)
                    break
        if st.timing:
            be.synchronize()
            t0 = be.timer_start()
            result = kernel(be.xp, *arrays, **attrs)
            elapsed = be.timer_stop(t0)
        else:
            result = kernel(be.xp, *arrays, **attrs)
        library = be.kernel_library()
        if multi:
            outs = tuple(_wrap(r, s, dev, be) for r, s in zip(result, spec))
        else:
            outs = (_wrap(result, spec, dev, be),)
    if st.grad_enabled and op.vjp is not None:
        for t in inputs:
            if t is not None and t.requires_grad:
                record_node(op, inputs, attrs, outs)
                break
    if st.observers:
        event = OpEvent(op, inputs, outs, attrs, current_module(), st.phase, elapsed, library)
        for obs in st.observers:
            obs.on_op(event)
    return outs if multi else outs[0]


def _widened(arrays, inputs, wide):
    """Operands in a dtype the backend computes in a wider one (bfloat16 -> float32 on numpy),
    as PyTorch's CPU kernels compute bfloat16; ``_wrap`` rounds the result back."""
    return [a if t is None or t.dtype not in wide else a.astype(wide[t.dtype].np, copy=False)
            for a, t in zip(arrays, inputs)]


def _wrap(array, spec, dev, be):
    # Kernels may return numpy scalars or a wider dtype (numpy promotion, or operands widened
    # by _widened); the spec decides, and the cast to it rounds to nearest. A dtype the backend
    # holds widened (int4 on CuPy) is rounded to it even when the kernel returned the wide dtype.
    if spec.dtype in be.stored_as or getattr(array, "dtype", None) != spec.dtype.np or not hasattr(array, "shape"):
        array = be.asarray(array, spec.dtype)
    return Tensor._make(array, spec.shape, spec.dtype, dev)


# --- observers -------------------------------------------------------------------------------

@contextlib.contextmanager
def observe(observer) -> Iterator:
    """Send every dispatched op to ``observer.on_op(event)`` while the block runs.

    ``observer.timing = True`` asks for device-synchronized elapsed time per op.
    """
    st = state
    previous, previous_timing = st.observers, st.timing
    st.observers = previous + (observer,)
    st.timing = previous_timing or bool(getattr(observer, "timing", False))
    try:
        yield observer
    finally:
        st.observers = tuple(o for o in st.observers if o is not observer)
        st.timing = any(getattr(o, "timing", False) for o in st.observers)


@contextlib.contextmanager
def named_scope(name: str) -> Iterator[None]:
    """Attribute the ops in the block to a named scope (used where no Module runs them)."""
    state.scope_stack.append(name)
    try:
        yield
    finally:
        state.scope_stack.pop()


# --- grad mode -------------------------------------------------------------------------------

class _GradMode:
    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.previous = None

    def __enter__(self):
        if self.previous is None:  # set_grad_enabled already switched and saved it
            self.previous = state.grad_enabled
        state.grad_enabled = self.enabled

    def __exit__(self, *exc):
        state.grad_enabled = self.previous
        self.previous = None

    def __call__(self, fn):
        import functools

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with _GradMode(self.enabled):
                return fn(*args, **kwargs)

        return wrapper


def no_grad() -> _GradMode:
    """Context manager (or decorator): ops record no autograd nodes inside."""
    return _GradMode(False)


def enable_grad() -> _GradMode:
    """Context manager (or decorator): turn grad mode back on inside a ``no_grad`` block."""
    return _GradMode(True)


def set_grad_enabled(enabled: bool) -> _GradMode:
    """Set grad mode now; also usable as a context manager that restores it."""
    mode = _GradMode(enabled)
    mode.previous = state.grad_enabled
    state.grad_enabled = enabled
    return mode


def is_grad_enabled() -> bool:
    return state.grad_enabled


@contextlib.contextmanager
def default_device(dev) -> Iterator[None]:
    """Factories create tensors (and modules their parameters) on ``dev`` inside the block."""
    previous = state.default_device
    state.default_device = parse_device(dev)
    try:
        yield
    finally:
        state.default_device = previous


@contextlib.contextmanager
def shapes_only() -> Iterator[None]:
    """Every op in the block runs its shape rule only and returns a meta tensor, whatever device
    its inputs are on, and factories make meta tensors: a real model on real inputs goes through
    the same ops (autograd and observers included) without computing or allocating anything.
    This is how a run's memory is predicted before it is allowed to run. Code that reads a
    value (``.item()``, a shape computed from data) raises, as on the meta device.

    >>> import flopcount.runtime as rt
    >>> net, x = rt.nn.Linear(3, 2), rt.ones(4, 3)
    >>> with shapes_only():
    ...     y = net(x)
    >>> y.device.type, y.shape
    ('meta', (4, 2))
    """
    st = state
    previous = st.shapes_only, st.default_device
    st.shapes_only, st.default_device = True, META
    try:
        yield
    finally:
        st.shapes_only, st.default_device = previous


def meta():
    """``with rt.meta():`` builds models with no parameter memory (shapes and dtypes only)."""
    return default_device(META)


from .tensor import Tensor  # noqa: E402  (tensor.py imports this module's apply)
from .autograd import record_node  # noqa: E402
