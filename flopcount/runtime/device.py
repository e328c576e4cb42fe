"""Devices and their backends: ``cpu`` (numpy), ``cuda`` (CuPy) and ``meta`` (shapes only).

Everything device-specific sits behind one small interface (``Backend``): the array module
``xp``, ``synchronize()``, a timer, memory statistics and a random generator. Code that is the
same on CPU and GPU is written once against ``xp``.
"""

from __future__ import annotations

import contextlib
import time
import tracemalloc
from typing import Iterator

import numpy as np

from . import dtypes as _dt
from .errors import DeviceError


class Device:
    """A device such as ``cpu``, ``cuda:0`` or ``meta``; compare equal by type and index."""

    __slots__ = ("type", "index")

    def __init__(self, type: str, index: int | None = None):
        self.type = type
        self.index = index

    def __eq__(self, other) -> bool:
        if isinstance(other, str):
            other = device(other)
        return isinstance(other, Device) and self.type == other.type and (self.index or 0) == (other.index or 0)

    def __hash__(self) -> int:
        return hash((self.type, self.index or 0))

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __repr__(self) -> str:
        return f"device(type='{self.type}'" + ("" if self.index is None else f", index={self.index}") + ")"


_DEVICE_CACHE: dict = {}


def device(spec) -> Device:
    """Parse ``'cpu'``, ``'cuda'``, ``'cuda:1'``, ``'meta'`` (or pass a Device through)."""
    if isinstance(spec, Device):
        return spec
    if spec is None:
        return CPU
    cached = _DEVICE_CACHE.get(spec)
    if cached is not None:
        return cached
    if not isinstance(spec, str):
        raise DeviceError(f"device must be a string such as 'cpu', 'cuda:0' or 'meta', got {spec!r}")
    kind, _, index = spec.partition(":")
    if kind not in ("cpu", "cuda", "meta"):
        raise DeviceError(f"unknown device {spec!r}; expected 'cpu', 'cuda', 'cuda:N' or 'meta'")
    if index and not index.isdigit():
        raise DeviceError(f"bad device index in {spec!r}")
    dev = Device(kind, int(index) if index else (0 if kind == "cuda" else None))
    _DEVICE_CACHE[spec] = dev
    return dev


CPU = Device("cpu")
META = Device("meta")


class Backend:
    """What the runtime needs from a device kind. Subclasses fill in the array module."""

    name = "abstract"
    xp = None
    per_device = False  # one backend object per device index (``backend_for``), e.g. each GPU
    # DType -> the DType kernels compute in, for dtypes the array module has no (fast or exact)
    # arithmetic for; the dispatcher widens the operands of computing ops and rounds back
    compute_dtypes: dict = {}

    def synchronize(self) -> None:
        """Wait for queued work to finish (a no-op where work is synchronous)."""

    def timer_start(self):
        """Start a timing span; pass the result to ``timer_stop``."""
        return time.perf_counter()

    def timer_stop(self, start) -> float:
        """Seconds since ``timer_start`` returned ``start``, with the device's work included."""
        return time.perf_counter() - start

    @contextlib.contextmanager
    def track_memory(self) -> Iterator["MemoryTracker"]:
        """Measure the peak bytes allocated while the block runs (``tracker.peak``)."""
        raise NotImplementedError

    def asarray(self, data, dtype):
        raise NotImplementedError

    def to_numpy(self, array) -> np.ndarray:
        raise NotImplementedError


class MemoryTracker:
    """Filled by ``Backend.track_memory``: bytes allocated at the peak, above the start.
    ``current()`` reads the bytes allocated now, above the start, while the block runs."""

    def __init__(self, current=None):
        self.peak = 0
        self._current = current

    def current(self) -> int:
        return 0 if self._current is None else max(0, self._current())


class CPUBackend(Backend):
    name = "cpu"
    xp = np
    # numpy's float16 has no BLAS (a 256x256 matmul is ~300x slower than in float32) and sums in
    # half; ml_dtypes' bfloat16 and float8 have slow ufuncs, no einsum and no BLAS; int4 arrays
    # have few ufuncs. PyTorch's CPU kernels do the same: load, compute in float32, round.
    compute_dtypes = {_dt.float16: _dt.float32, _dt.bfloat16: _dt.float32,
                      **{f8: _dt.float32 for f8 in _dt.FLOAT8},
                      _dt.float4_e2m1fn: _dt.float32, _dt.float8_e8m0fnu: _dt.float32,
                      _dt.int4: _dt.int8, _dt.uint4: _dt.uint8, _dt.int2: _dt.int8, _dt.uint2: _dt.uint8}

    def __init__(self):
        self.rng = np.random.default_rng(0)

    @contextlib.contextmanager
    def track_memory(self):
        # numpy reports its buffers to tracemalloc, so the traced peak is the arrays' peak.
        was_tracing = tracemalloc.is_tracing()
        if not was_tracing:
            tracemalloc.start()
        start, _ = tracemalloc.get_traced_memory()
        tracker = MemoryTracker(lambda: tracemalloc.get_traced_memory()[0] - start)
        tracemalloc.reset_peak()
        try:
            yield tracker
        finally:
            _, peak = tracemalloc.get_traced_memory()
            tracker.peak = max(0, peak - start)
            if not was_tracing:
                tracemalloc.stop()

    def asarray(self, data, dtype):
        return np.asarray(data, dtype=dtype.np)

    def to_numpy(self, array) -> np.ndarray:
        return array

    def seed(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)


class MetaBackend(Backend):
    """No data at all: only shape rules run. Timing and memory are zero."""

    name = "meta"
    xp = None

    @contextlib.contextmanager
    def track_memory(self):
        yield MemoryTracker()

    def asarray(self, data, dtype):
        return None

    def to_numpy(self, array):
        raise DeviceError("a meta tensor has no data; build it on 'cpu' or 'cuda' to read values")

    def seed(self, seed: int) -> None:
        pass


_BACKENDS: dict = {"cpu": CPUBackend(), "meta": MetaBackend()}


def backend(dev: Device) -> Backend:
    """The backend object for a device (CUDA is loaded on first use)."""
    b = _BACKENDS.get(dev.type)
    if b is None:
        if dev.type != "cuda":
            raise DeviceError(f"no backend for device {dev}")
        from .cuda.backend import load_cuda_backend

        b = _BACKENDS["cuda"] = load_cuda_backend()
    if b.per_device:  # that device's backend, made current so new arrays land on it
        return b.backend_for(dev.index)
    return b


def seed_all(seed: int) -> None:
    """Seed every loaded backend's random generator."""
    for b in _BACKENDS.values():
        b.seed(seed)
