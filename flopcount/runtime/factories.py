"""Tensor factories (``zeros``, ``randn``, ``arange``...) and the random seed.

Factories are not ops: they create inputs and constants, which no FLOP counter charges. While a
graph is being traced, a factory asked for a meta tensor still computes its (small) value so the
tracer can keep it as a constant of the graph.
"""

from __future__ import annotations

import numpy as np

from . import dtypes as _dt
from .device import backend, device as parse_device, seed_all
from .dispatch import state
from .random import random_array
from .tensor import Tensor, _shape_args


def _dev(device):
    return parse_device(device) if device is not None else state.default_device


def _make(fill, shape, dtype, device, requires_grad=False) -> Tensor:
    """Build a tensor whose data is ``fill(xp, shape, np_dtype)``."""
    dev = _dev(device)
    dtype = _dt.get_dtype(dtype) if dtype is not None else _dt.default_float
    shape = tuple(int(s) for s in shape)
    if any(s < 0 for s in shape):
        from .errors import ShapeError

        raise ShapeError(f"negative dimension in size {shape}")
    if dev.type == "meta":
        data = fill(np, shape, dtype.np) if state.tracer is not None else None
    else:
        be = backend(dev)
        data = fill(be.xp, shape, be.storage(dtype))
    t = Tensor._make(data, shape, dtype, dev)
    if requires_grad:
        t.requires_grad_(True)
    return t


def zeros(*size, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A tensor of zeros: ``rt.zeros(2, 3)`` or ``rt.zeros((2, 3))``."""
    return _make(lambda xp, s, d: xp.zeros(s, d), _shape_args(size), dtype, device, requires_grad)


def ones(*size, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A tensor of ones."""
    return _make(lambda xp, s, d: xp.ones(s, d), _shape_args(size), dtype, device, requires_grad)


def empty(*size, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """An uninitialized tensor (its values are whatever the allocator returns)."""
    return _make(lambda xp, s, d: xp.empty(s, d), _shape_args(size), dtype, device, requires_grad)


def full(size, fill_value, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A tensor filled with ``fill_value``; the dtype follows the value when not given."""
    if dtype is None:
        dtype = _dt.bool_ if isinstance(fill_value, bool) else (
            _dt.int64 if isinstance(fill_value, int) else _dt.default_float)
    return _make(lambda xp, s, d: xp.full(s, fill_value, d), _shape_args((size,)), dtype, device,
                 requires_grad)


def eye(n: int, m: int | None = None, dtype=None, device=None) -> Tensor:
    return _make(lambda xp, s, d: xp.eye(s[0], s[1], dtype=d), (n, m if m is not None else n), dtype, device)


def arange(start, end=None, step=1, dtype=None, device=None) -> Tensor:
    """``rt.arange(5)``, ``rt.arange(1, 10, 2)``; int64 for integer arguments, else float32."""
    if end is None:
        start, end = 0, start
    if dtype is None:
        ints = all(isinstance(v, (int, np.integer)) for v in (start, end, step))
        dtype = _dt.int64 if ints else _dt.default_float
    count = max(0, int(np.ceil((end - start) / step)))
    return _make(lambda xp, s, d: xp.arange(start, end, step, dtype=d)[: s[0]], (count,), dtype, device)


def linspace(start: float, end: float, steps: int, dtype=None, device=None) -> Tensor:
    return _make(lambda xp, s, d: xp.linspace(start, end, steps, dtype=d), (steps,), dtype, device)


def rand(*size, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """Uniform random numbers in [0, 1)."""
    dev = _dev(device)
    dtype = _dt.get_dtype(dtype) if dtype is not None else _dt.default_float
    return _make(lambda xp, s, d: random_array(dev if dev.type != "meta" else "cpu", "uniform", s, dtype),
                 _shape_args(size), dtype, dev, requires_grad)


def randn(*size, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """Standard normal random numbers."""
    dev = _dev(device)
    dtype = _dt.get_dtype(dtype) if dtype is not None else _dt.default_float
    return _make(lambda xp, s, d: random_array(dev if dev.type != "meta" else "cpu", "normal", s, dtype),
                 _shape_args(size), dtype, dev, requires_grad)


def randint(low: int, high: int | None = None, size=(), dtype=None, device=None) -> Tensor:
    """Random integers in [low, high) (``rt.randint(10, (2, 3))`` or ``rt.randint(0, 10, (2, 3))``)."""
    if high is None:
        low, high = 0, low
    dev = _dev(device)

    def fill(xp, s, d):
        be = backend(dev if dev.type != "meta" else parse_device("cpu"))
        return be.rng.integers(low, high, size=s).astype(d)

    return _make(fill, tuple(size), dtype or _dt.int64, dev)


def _like(fn, t: Tensor, dtype, device, **kw):
    return fn(*t.shape, dtype=dtype or t.dtype, device=device or t.device, **kw)


def zeros_like(t: Tensor, dtype=None, device=None) -> Tensor:
    return _like(zeros, t, dtype, device)


def ones_like(t: Tensor, dtype=None, device=None, fill=1) -> Tensor:
    if fill != 1:
        return full(t.shape, fill, dtype=dtype or t.dtype, device=device or t.device)
    return _like(ones, t, dtype, device)


def empty_like(t: Tensor, dtype=None, device=None) -> Tensor:
    return _like(empty, t, dtype, device)


def full_like(t: Tensor, fill_value, dtype=None, device=None) -> Tensor:
    return full(t.shape, fill_value, dtype=dtype or t.dtype, device=device or t.device)


def rand_like(t: Tensor, dtype=None, device=None) -> Tensor:
    return _like(rand, t, dtype, device)


def randn_like(t: Tensor, dtype=None, device=None) -> Tensor:
    return _like(randn, t, dtype, device)


def manual_seed(seed: int) -> None:
    """Seed the random generators of every device (initialization, rand, dropout)."""
    seed_all(int(seed))


def from_numpy(array: np.ndarray) -> Tensor:
    """A CPU tensor sharing memory with ``array`` (no copy)."""
    return Tensor._make(array, tuple(array.shape), _dt.get_dtype(array.dtype), parse_device("cpu"))
