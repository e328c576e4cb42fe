"""The CUDA backend's CPU-side behaviour: the errors CI sees without CuPy or a GPU, the
device switching of per-GPU backends and the pool-peak bookkeeping (with a stand-in CuPy)."""

import importlib
import sys
import types

import pytest

import flopcount.runtime as rt
from flopcount.runtime.cuda import backend as cb

device_mod = importlib.import_module("flopcount.runtime.device")  # the module, not rt.device()


@pytest.fixture
def no_cupy(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)  # import cupy -> ImportError
    monkeypatch.delitem(device_mod._BACKENDS, "cuda", raising=False)


def _fake_cupy(count=2, fail=None):
    state = {"current": 0, "set": []}

    def get_count():
        if fail:
            raise RuntimeError(fail)
        return count

    def set_device(i):
        state["current"] = i
        state["set"].append(i)

    runtime = types.SimpleNamespace(getDeviceCount=get_count, getDevice=lambda: state["current"],
                                    setDevice=set_device)
    cupy = types.SimpleNamespace(cuda=types.SimpleNamespace(runtime=runtime))
    return cupy, state


def test_without_cupy_cuda_is_unavailable_and_tensors_say_how_to_install(no_cupy):
    assert rt.cuda.is_available() is False
    assert rt.cuda.device_count() == 0
    rt.cuda.synchronize()  # a no-op, not an error
    with pytest.raises(rt.DeviceError, match=r"needs CuPy.*pip install 'flopcount\[cuda12\]'"):
        rt.zeros(2, 3, device="cuda")
    with pytest.raises(rt.DeviceError, match="needs CuPy"):
        rt.ones(2).to("cuda:0")
    with pytest.raises(rt.DeviceError, match="needs CuPy"):
        rt.nn.Linear(2, 2).cuda()


def test_cupy_without_a_gpu_is_named(monkeypatch):
    cupy, _ = _fake_cupy(fail="cudaErrorNoDevice")
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    monkeypatch.delitem(device_mod._BACKENDS, "cuda", raising=False)
    assert not rt.cuda.is_available()
    with pytest.raises(rt.DeviceError, match="CuPy is installed but no GPU is usable.*cudaErrorNoDevice"):
        rt.zeros(1, device="cuda")
    cupy, _ = _fake_cupy(count=0)
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    with pytest.raises(rt.DeviceError, match="no GPU was found"):
        rt.zeros(1, device="cuda")


def test_device_lookup_selects_the_tensor_gpu(monkeypatch):
    cupy, state = _fake_cupy(count=2)
    be = cb.CUDABackend(cupy)
    monkeypatch.setitem(device_mod._BACKENDS, "cuda", be)
    b1 = device_mod.backend(rt.device("cuda:1"))
    assert b1.index == 1 and state["current"] == 1
    assert device_mod.backend(rt.device("cuda:1")) is b1 and state["set"] == [1]  # already current
    assert device_mod.backend(rt.device("cuda")) is be and state["current"] == 0
    with pytest.raises(rt.DeviceError, match=r"'cuda:2' does not exist: 2 GPU\(s\) visible"):
        device_mod.backend(rt.device("cuda:2"))
    assert device_mod.backend(rt.device("cpu")).per_device is False


def test_seed_reaches_every_gpu():
    cupy, _ = _fake_cupy(count=2)
    be = cb.CUDABackend(cupy)
    b1 = be.backend_for(1)
    b1._rng = object()
    be.seed(7)
    assert b1._seed == 7 and b1._rng is None and be._seed == 7


def test_pool_peak_follows_one_device():
    p = cb.PoolPeak(device_id=0, start_used=1024)
    p.malloc(0, 512)
    p.malloc(1, 10**9)      # another GPU's pool: not ours
    p.malloc(0, 2048)
    p.free(0, 512)
    p.malloc(0, 256)
    p.alloc(0, 2 * 2**20)   # the pool grew by a device allocation
    assert p.peak - p.start == 2560
    assert p.used - p.start == 2304
    assert p.device_bytes == 2 * 2**20


def test_pool_peak_hook_installs_in_cupy_and_takes_its_callbacks():
    # CuPy without a GPU (the CUDA CI environment): the hook is a real MemoryHook, is installed
    # for the block, and its callbacks take the keyword arguments CuPy's pool passes
    cupy = pytest.importorskip("cupy")
    from cupy.cuda import memory_hook

    state = cb.PoolPeak(device_id=0, start_used=0)
    hook = cb._hook_for(cupy, state)
    assert isinstance(hook, memory_hook.MemoryHook)
    with hook:
        assert hook.name in memory_hook.get_memory_hooks()
        hook.alloc_postprocess(device_id=0, mem_size=2**20, mem_ptr=1)
        hook.malloc_postprocess(device_id=0, size=1000, mem_size=1024, mem_ptr=1, pmem_id=7)
        hook.malloc_postprocess(device_id=0, size=500, mem_size=512, mem_ptr=2, pmem_id=7)
        hook.free_postprocess(device_id=0, mem_size=1024, mem_ptr=1, pmem_id=7)
    assert hook.name not in memory_hook.get_memory_hooks()
    assert (state.peak, state.used, state.device_bytes) == (1536, 512, 2**20)
