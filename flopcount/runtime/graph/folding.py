"""Running ops on constants at compile time: the tracer folds shape arithmetic with these, the
constant-folding pass folds nodes, and the ONNX and PyTorch converters respect the same memory
bound (``FOLD_LIMIT_BYTES``) for the constants they make.
"""

from __future__ import annotations

import contextlib
from math import prod

from ..device import CPU
from ..dispatch import apply, state
from ..tensor import Tensor

# the most bytes an op computed from constants may produce at compile time (a 8192x8192 float mask)
FOLD_LIMIT_BYTES = 256 << 20


def fold_limit() -> int:
    """FOLD_LIMIT_BYTES as it is now (a test may lower it)."""
    return FOLD_LIMIT_BYTES


@contextlib.contextmanager
def quiet_cpu():
    """Run ops for real with no tracer, no observers and no autograd (compile-time work that
    is not the model's: folding constants)."""
    st = state
    saved = (st.tracer, st.observers, st.timing, st.grad_enabled)
    st.tracer, st.observers, st.timing, st.grad_enabled = None, (), False, False
    try:
        yield
    finally:
        st.tracer, st.observers, st.timing, st.grad_enabled = saved


def on_cpu(t: Tensor) -> Tensor:
    """``t`` on the CPU (a meta tensor carrying a small array: that array)."""
    if t.device.type == "meta":
        return Tensor._make(t.data, t.shape, t.dtype, CPU)
    return t if t.device.type == "cpu" else t.to("cpu")


def run_on_cpu(op, inputs: tuple, attrs: dict):
    """``op`` run now on the CPU copies of ``inputs``, outside any trace or observer.

    >>> import flopcount.runtime as rt
    >>> from flopcount.runtime.registry import get_op
    >>> run_on_cpu(get_op("add"), (rt.ones(2), rt.ones(2)), {}).numpy().tolist()
    [2.0, 2.0]
    """
    with quiet_cpu():
        return apply(op, *[None if t is None else on_cpu(t) for t in inputs], **attrs)


def fold(op, inputs: tuple, attrs: dict):
    """The op run at once on the CPU, or None when its outputs would be above the fold limit."""
    cpu_inputs = [None if t is None else on_cpu(t) for t in inputs]
    specs = op.shape(*cpu_inputs, **attrs)
    size = sum(prod(s.shape) * s.dtype.itemsize for s in (specs if isinstance(specs, tuple) else (specs,)))
    if size > fold_limit():
        return None
    return run_on_cpu(op, cpu_inputs, attrs)
