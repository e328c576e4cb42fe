"""CuPy behind the Backend interface: device selection, CUDA-event timing, the memory pool's
high-water mark and one random generator per GPU.

One ``CUDABackend`` exists per GPU index. ``device.backend(dev)`` asks for it through
``backend_for(index)``, which also makes that GPU current, so every array a kernel, a factory or
``Tensor.to`` creates lands on the tensor's own device (CuPy allocates on the current device).
"""

from __future__ import annotations

import contextlib

from .. import dtypes as _dt
from ..backend import Backend, MemoryTracker
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
    """True when CuPy imports and sees at least one GPU.

    >>> import flopcount.runtime as rt
    >>> rt.cuda.is_available() in (True, False)
    True
    """
    try:
        _import_cupy()
        return True
    except DeviceError:
        return False


def device_count() -> int:
    """Number of visible GPUs (0 without CuPy or a GPU)."""
    try:
        return _import_cupy().cuda.runtime.getDeviceCount()
    except DeviceError:
        return 0


class PoolPeak:
    """Follows the bytes CuPy's memory pool hands out on one GPU, and their high-water mark.

    CuPy calls a memory hook for pool allocations (``malloc_*``: what arrays hold, in the pool's
    512-byte units, ``mem_size``) and for device allocations (``alloc_*``: ``cudaMalloc`` when the
    pool grows). The peak an array program needs is the pool's, so only ``malloc``/``free`` count;
    ``device_bytes`` records the growth of the pool itself, for reference.
    """

    def __init__(self, device_id: int, start_used: int):
        self.device_id = device_id
        self.start = start_used
        self.used = start_used
        self.peak = start_used
        self.device_bytes = 0

    def malloc(self, device_id: int, mem_size: int) -> None:
        if device_id == self.device_id:
            self.used += mem_size
            if self.used > self.peak:
                self.peak = self.used

    def free(self, device_id: int, mem_size: int) -> None:
        if device_id == self.device_id:
            self.used -= mem_size

    def alloc(self, device_id: int, mem_size: int) -> None:
        if device_id == self.device_id:
            self.device_bytes += mem_size


def _hook_for(cupy, state: PoolPeak):
    """A ``cupy.cuda.memory_hook.MemoryHook`` feeding ``state`` (keyword-only callbacks)."""
    from cupy.cuda import memory_hook

    class PeakHook(memory_hook.MemoryHook):
        name = "flopcount_pool_peak"

        def malloc_postprocess(self, **kw):
            state.malloc(kw["device_id"], kw["mem_size"])

        def free_postprocess(self, **kw):
            state.free(kw["device_id"], kw["mem_size"])

        def alloc_postprocess(self, **kw):
            state.alloc(kw["device_id"], kw["mem_size"])

    return PeakHook()


class CUDABackend(Backend):
    """The backend of one GPU (``cuda:index``)."""

    name = "cuda"
    per_device = True
    # float16 and bfloat16 run as they are (the raw and generated kernels load them into float
    # registers); float8 and 4-bit integers have no CuPy arithmetic: computed widened
    compute_dtypes = {**{f8: _dt.float32 for f8 in _dt.FLOAT8}, _dt.float4_e2m1fn: _dt.float32,
                      _dt.float8_e8m0fnu: _dt.float32, _dt.int4: _dt.int8, _dt.uint4: _dt.uint8,
                      _dt.int2: _dt.int8, _dt.uint2: _dt.uint8}
    stored_as = compute_dtypes  # CuPy has arrays of none of these dtypes, only arithmetic on the wide ones

    def __init__(self, cupy, index: int = 0, seed: int = 0):
        self.cupy = cupy
        self.xp = cupy
        self.index = index
        self._seed = seed
        self._rng = None
        self._others: dict = {index: self}

    # --- devices ---------------------------------------------------------------------------
    def backend_for(self, index) -> "CUDABackend":
        """The backend of GPU ``index``, made the current device."""
        index = index or 0
        be = self._others.get(index)
        if be is None:
            count = self.cupy.cuda.runtime.getDeviceCount()
            if index >= count:
                raise DeviceError(f"device 'cuda:{index}' does not exist: {count} GPU(s) visible")
            be = CUDABackend(self.cupy, index, self._seed)
            be._others = self._others
            self._others[index] = be
        runtime = self.cupy.cuda.runtime
        if runtime.getDevice() != index:
            runtime.setDevice(index)
        return be

    def _device(self):
        return self.cupy.cuda.Device(self.index)

    # --- work and time ---------------------------------------------------------------------
    def synchronize(self) -> None:
        with self._device():
            self.cupy.cuda.get_current_stream().synchronize()

    # CUDA events around the work: a host timer alone would time the launch, not the kernel.
    def timer_start(self):
        with self._device():
            start = self.cupy.cuda.Event()
            start.record()
        return start

    def timer_stop(self, start) -> float:
        with self._device():
            stop = self.cupy.cuda.Event()
            stop.record()
        stop.synchronize()
        return self.cupy.cuda.get_elapsed_time(start, stop) / 1000.0

    def kernel_library(self) -> str:
        from .kernels import paths

        return paths.take()

    # --- memory ----------------------------------------------------------------------------
    def free_memory(self) -> int:
        """Bytes arrays can still take on this GPU: what the device has free, plus what CuPy's
        pool holds from freed arrays and hands out again before asking the device."""
        with self._device():
            free, _total = self.cupy.cuda.runtime.memGetInfo()
            return int(free) + int(self.cupy.get_default_memory_pool().free_bytes())

    @contextlib.contextmanager
    def track_memory(self):
        """Peak bytes of CuPy's memory pool on this GPU while the block runs, above its start
        (what arrays hold, like ``torch.cuda.max_memory_allocated``)."""
        pool = self.cupy.get_default_memory_pool()
        with self._device():
            self.synchronize()
            state = PoolPeak(self.index, pool.used_bytes())
        tracker = MemoryTracker(lambda: state.used - state.start)
        try:
            with _hook_for(self.cupy, state):
                yield tracker
                self.synchronize()
        finally:
            tracker.peak = max(0, state.peak - state.start)
            tracker.device_bytes = state.device_bytes

    # --- data ------------------------------------------------------------------------------
    def asarray(self, data, dtype):
        with self._device():
            return super().asarray(data, dtype)

    def to_numpy(self, array):
        return self.cupy.asnumpy(array)

    @property
    def rng(self):
        """This GPU's generator (``rt.manual_seed`` reseeds every GPU's)."""
        if self._rng is None:
            with self._device():
                self._rng = self.cupy.random.default_rng(self._seed)
        return self._rng

    def seed(self, seed: int) -> None:
        for be in self._others.values():
            be._seed = seed
            be._rng = None


def load_cuda_backend() -> CUDABackend:
    return CUDABackend(_import_cupy())
