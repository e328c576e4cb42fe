"""The training step both views run: forward with gradients, then backward seeded with ones."""

from __future__ import annotations

import contextlib

from ..runtime.dispatch import enable_grad
from ..runtime.factories import ones_like
from ..runtime.graph.tree import tensor_leaves


def backward_seed(output):
    """The first floating output that needs a gradient (``None`` when there is none)."""
    for t in tensor_leaves(output):
        if t.dtype.is_floating_point and t.requires_grad:
            return t
    return None


def training_step(forward, tensors, clock=None):
    """``forward()`` with gradients, then backward seeded with ones; ``tensors`` (the
    parameters) start without gradients, so every step dispatches the same ops. ``clock``, when
    given, is a context manager factory wrapped around the backward pass alone (its timer)."""
    for t in tensors:
        t.grad = None
    with enable_grad():
        out = forward()
        seed = backward_seed(out)
        if seed is not None:
            grad = ones_like(seed)
            with clock() if clock is not None else contextlib.nullcontext():
                seed.backward(grad)
    return out
