"""CuPy behind the Backend interface: CUDA-event timing and the memory pool's high-water mark."""

from __future__ import annotations

import contextlib

from ..device import Backend, MemoryTracker
from ..errors import DeviceError

INSTALL_HINT = "install CuPy for your CUDA version: pip install 'flopcount[cuda12]' or 'flopcount[cuda13]'"


def _import_cupy():
    try:
        import cupy
    except Exception as exc:  # ImportError, or CUDA libraries missing at import time
        raise DeviceError(f"device 'cuda' needs CuPy, which could not be imported ({exc}); {INSTALL_HINT}") from None
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:
        raise DeviceError(f"device 'cuda': CuPy is installed but no GPU is usable ({exc})") from None
    if count == 0:
        raise DeviceError("device 'cuda': CuPy is installed but no GPU was found")
    return cupy


def is_available() -> bool:
    """True when CuPy imports and sees at least one GPU."""
    try:
        _import_cupy()
        return True
    except DeviceError:
        return False


def device_count() -> int:
    """Number of visible GPUs (0 without CuPy)."""
    try:
        return _import_cupy().cuda.runtime.getDeviceCount()
    except DeviceError:
        return 0


def synchronize() -> None:
    """Wait for all queued GPU work (no-op without a GPU)."""
    if is_available():
        _import_cupy().cuda.Device().synchronize()


class _PeakHook:
    """A CuPy memory hook that records the pool's high-water mark of used bytes."""

    def __init__(self, cupy, start_used: int):
        self.cupy = cupy
        self.used = start_used
        self.start = start_used
        self.peak = start_used

    def malloc_postprocess(self, **kw):
        self.used += kw["mem_size"]
        self.peak = max(self.peak, self.used)

    def free_postprocess(self, **kw):
        self.used -= kw["mem_size"]


class CUDABackend(Backend):
    name = "cuda"

    def __init__(self, cupy):
        self.cupy = cupy
        self.xp = cupy
        self.rng = cupy.random.default_rng(0)

    def synchronize(self) -> None:
        self.cupy.cuda.get_current_stream().synchronize()

    # CUDA events around the work: host timers alone would time the launch, not the kernel.
    def timer_start(self):
        start = self.cupy.cuda.Event()
        start.record()
        return start

    def timer_stop(self, start) -> float:
        stop = self.cupy.cuda.Event()
        stop.record()
        stop.synchronize()
        return self.cupy.cuda.get_elapsed_time(start, stop) / 1000.0

    @contextlib.contextmanager
    def track_memory(self):
        from cupy.cuda import memory_hook

        pool = self.cupy.get_default_memory_pool()
        hook_state = _PeakHook(self.cupy, pool.used_bytes())
        tracker = MemoryTracker(lambda: hook_state.used - hook_state.start)

        class Hook(memory_hook.MemoryHook):
            name = "flopcount_peak"

            def malloc_postprocess(self, **kw):
                hook_state.malloc_postprocess(**kw)

            def free_postprocess(self, **kw):
                hook_state.free_postprocess(**kw)

        self.synchronize()
        try:
            with Hook():
                yield tracker
                self.synchronize()
        finally:
            tracker.peak = max(0, hook_state.peak - hook_state.start)

    def asarray(self, data, dtype):
        return self.cupy.asarray(data, dtype=dtype.np)

    def to_numpy(self, array):
        return self.cupy.asnumpy(array)

    def seed(self, seed: int) -> None:
        self.rng = self.cupy.random.default_rng(seed)


def load_cuda_backend() -> CUDABackend:
    return CUDABackend(_import_cupy())
