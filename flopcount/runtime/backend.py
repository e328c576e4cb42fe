"""What the runtime needs from a device kind (:class:`Backend`), and the backends of the CPU
(numpy) and of the meta device (no data).

Everything device-specific sits behind this small interface: the array module ``xp``,
``synchronize()``, a timer, memory statistics and a random generator. Code that is the same on
CPU and GPU is written once against ``xp``. ``device.backend(dev)`` hands out the backend of a
device; the CUDA backend (``cuda/backend.py``) implements the same interface.
"""

from __future__ import annotations

import contextlib
import tracemalloc
from typing import Iterator

import numpy as np

from . import clock
from . import dtypes as _dt
from .errors import DeviceError


class Backend:
    """What the runtime needs from a device kind. Subclasses fill in the array module."""

    name = "abstract"
    xp = None
    per_device = False  # one backend object per device index (``backend_for``), e.g. each GPU
    # DType -> the DType kernels compute in, for dtypes the array module has no (fast or exact)
    # arithmetic for; the dispatcher widens the operands of computing ops and rounds back
    compute_dtypes: dict = {}
    # DType -> the DType its values are held in, for dtypes the array module cannot hold at all
    # (CuPy has no int4 or float8 arrays); a tensor's dtype stays the narrow one, every value
    # written is rounded to it first, and reading the values back gives the narrow dtype
    stored_as: dict = {}

    def storage(self, dtype) -> np.dtype:
        """The numpy dtype of this backend's arrays holding ``dtype`` values."""
        wide = self.stored_as.get(dtype)
        return dtype.np if wide is None else wide.np

    def asarray(self, data, dtype):
        """``data`` as this backend's array of ``dtype`` (not copied where it already is one)."""
        wide = self.stored_as.get(dtype)
        if wide is None:
            return self.xp.asarray(data, dtype=dtype.np)
        host = self.to_numpy(data) if isinstance(data, self.xp.ndarray) else np.asarray(data)
        return self.xp.asarray(host.astype(dtype.np).astype(wide.np))  # rounded to the narrow dtype

    def synchronize(self) -> None:
        """Wait for queued work to finish (a no-op where work is synchronous)."""

    def kernel_library(self) -> str | None:
        """The library path the op that just ran took ("cuBLAS", "own kernel", "CuPy"), for the
        report; None where there is only one (the CPU). The dispatcher asks after every op."""
        return None

    def timer_start(self):
        """Start a timing span; pass the result to ``timer_stop``. On the CPU: ``clock.read()``,
        the thread's own CPU time in a one-thread run, else wall time (``clock.py``)."""
        return clock.read()

    def timer_stop(self, start) -> float:
        """Seconds since ``timer_start`` returned ``start``, with the device's work included."""
        return clock.read() - start

    @contextlib.contextmanager
    def track_memory(self) -> Iterator["MemoryTracker"]:
        """Measure the peak bytes allocated while the block runs (``tracker.peak``)."""
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
    # numpy's float16 has no BLAS (a matmul is orders of magnitude slower than in float32) and sums in
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


__all__ = ["Backend", "MemoryTracker", "CPUBackend", "MetaBackend"]
