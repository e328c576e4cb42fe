"""Leave no trace: what profiling may touch on a model, saved and put back.

A profile switches train/eval mode and, for a training step, fills ``.grad`` and updates
running statistics (batch norm's buffers) in place. ``ModelState`` saves every module's
``training`` flag, every parameter's ``requires_grad`` and ``grad`` and every buffer's data
before, and restores them afterwards (also when the forward raises).
"""

from __future__ import annotations

import contextlib
from typing import Iterator


class ModelState:
    """A snapshot of the flags and gradients of a model's modules and parameters."""

    def __init__(self, model, index=None):
        from ..recording.params import ModelIndex

        index = index or ModelIndex(model)
        self.training = [(m, m.training) for _, m in index.modules]
        self.params = [(p, p.requires_grad, p.grad) for p in index.params]
        self.buffers = [(b, None if b.data is None else b.data.copy()) for b in index.buffers]

    def restore(self) -> None:
        for m, flag in self.training:
            m.__dict__["training"] = flag
        for p, requires_grad, grad in self.params:
            p.requires_grad = requires_grad
            p.grad = grad
        for b, data in self.buffers:
            if data is not None:
                b.data = data


@contextlib.contextmanager
def preserved(model, index=None) -> Iterator[ModelState]:
    """Run the block, then put the model's flags and gradients back as they were."""
    state = ModelState(model, index)
    try:
        yield state
    finally:
        state.restore()
