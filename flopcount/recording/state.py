"""Leave no trace: what profiling may touch on a model, saved and put back.

A profile switches train/eval mode and, for a training step, fills ``.grad`` and updates
running statistics (batch norm's buffers) in place; a model's own forward may change its
weights (``self.weight.mul_(2)``), rebind them (``self.bias = Parameter(...)``,
``self.steps += 1``) or add modules. ``ModelState`` saves every module's ``training`` flag and
which parameters, buffers and submodules it holds, every parameter's ``requires_grad`` and
``grad``, and every parameter's and buffer's data; it restores them afterwards (also when the
forward raises), so the model is exactly as it was.

The data is not copied on the CPU: its arrays are made read-only for the run, so that a write
in place goes to a copy (``Tensor._own_data``, the runtime's copy-on-write) and the arrays
themselves never change; afterwards each tensor gets its own array back. Arrays without a
read-only flag (CuPy's) are copied to host memory and written back.
"""

from __future__ import annotations

import contextlib
from typing import Iterator

import numpy as np

_STORES = ("_parameters", "_buffers", "_modules")


class _Data:
    """One tensor's array, kept unchanged for the run and given back to the tensor after it."""

    def __init__(self, tensor, frozen: dict):
        self.tensor, self.array, self.host = tensor, tensor.data, None
        if self.array is None:
            return
        if isinstance(self.array, np.ndarray):
            key = id(self.array)
            if key not in frozen:  # an array shared by tied weights: frozen (and thawed) once
                frozen[key] = (self.array, self.array.flags.writeable)
                self.array.flags.writeable = False
        elif hasattr(self.array, "get"):
            self.host = self.array.get()  # CuPy: a copy in host memory

    def restore(self) -> None:
        if self.array is None:
            return
        if self.host is not None:
            self.array.set(self.host)  # CuPy writes in place; this undoes it
        self.tensor.data = self.array


def _thaw(frozen: dict) -> None:
    """Give each array its writeable flag back. A view can be made writeable only once its base
    is, so the arrays that refuse are retried after the others."""
    pending = [array for array, writeable in frozen.values() if writeable]
    while pending:
        refused = []
        for array in pending:
            try:
                array.flags.writeable = True
            except ValueError:
                refused.append(array)
        if len(refused) == len(pending):
            return
        pending = refused


class ModelState:
    """A snapshot of a model's modules (flags and what they hold) and of its tensors."""

    def __init__(self, model, index=None):
        from ..recording.params import ModelIndex

        index = index or ModelIndex(model)
        self.training = [(m, m.training) for _, m in index.modules]
        self.held = [(m, {store: dict(m.__dict__[store]) for store in _STORES if store in m.__dict__},
                      set(m.__dict__.get("_non_persistent_buffers", ()))) for _, m in index.modules]
        self.params = [(p, p.requires_grad, p.grad) for p in index.params]
        self.frozen: dict = {}
        self.data = [_Data(t, self.frozen) for t in list(index.params) + list(index.buffers)]

    def restore(self) -> None:
        for m, flag in self.training:
            m.__dict__["training"] = flag
        for m, stores, non_persistent in self.held:
            for store, held in stores.items():
                current = m.__dict__[store]
                if current.keys() != held.keys() or any(current[k] is not v for k, v in held.items()):
                    current.clear()
                    current.update(held)
                for name in held:  # a plain attribute set in forward would hide the registered one
                    m.__dict__.pop(name, None)
            if "_non_persistent_buffers" in m.__dict__:
                m.__dict__["_non_persistent_buffers"] = non_persistent
        for p, requires_grad, grad in self.params:
            p.requires_grad = requires_grad
            p.grad = grad
        for data in self.data:
            data.restore()
        _thaw(self.frozen)


@contextlib.contextmanager
def preserved(model, index=None) -> Iterator[ModelState]:
    """Run the block, then put the model back exactly as it was (flags, the tensors each module
    holds, their data, gradients)."""
    state = ModelState(model, index)
    try:
        yield state
    finally:
        state.restore()
