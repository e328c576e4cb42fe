"""Devices, CUDA-event timing, the memory pool's peak and the kernel cache on a real GPU."""

import numpy as np
import pytest

import flopcount
import flopcount.runtime as rt
from flopcount.runtime.cuda.kernels import cache
from flopcount.runtime.device import backend


def test_tensors_and_modules_move_between_devices():
    x = rt.randn(3, 4)
    g = x.to("cuda")
    assert g.device == rt.device("cuda:0") and g.is_cuda
    np.testing.assert_array_equal(g.cpu().numpy(), x.numpy())
    model = rt.nn.Sequential(rt.nn.Linear(4, 5), rt.nn.ReLU(), rt.nn.BatchNorm1d(5))
    model.cuda()
    assert all(t.device.type == "cuda" for t in list(model.parameters()) + list(model.buffers()))
    out = model(g)
    assert out.device.type == "cuda"
    model.cpu()
    assert all(t.device.type == "cpu" for t in model.parameters())
    with pytest.raises(rt.DeviceError, match="inputs are on different devices"):
        g + x
    rt.cuda.synchronize()


def test_factories_and_seeds_on_the_gpu():
    rt.manual_seed(3)
    a = rt.randn(1000, device="cuda")
    rt.manual_seed(3)
    b = rt.randn(1000, device="cuda")
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert rt.zeros(2, 3, dtype=rt.float16, device="cuda").dtype is rt.float16
    assert abs(float(a.numpy().std()) - 1) < 0.1


@pytest.mark.skipif(rt.cuda.device_count() < 2, reason="needs two GPUs")
def test_second_gpu_keeps_its_arrays():
    x = rt.randn(64, 64, device="cuda:1", requires_grad=True)
    y = rt.nn.functional.dropout(rt.nn.functional.gelu(x @ x), 0.5)
    assert y.device == rt.device("cuda:1") and y.data.device.id == 1
    y.sum().backward()
    assert x.grad.data.device.id == 1
    z = x.to("cuda:0")
    assert z.data.device.id == 0
    np.testing.assert_array_equal(z.numpy(), x.numpy())


def test_event_timer_measures_kernel_time():
    be = backend(rt.device("cuda"))
    import cupy

    small, big = cupy.ones((256, 256), cupy.float32), cupy.ones((4096, 4096), cupy.float32)
    small @ small, big @ big  # warm-up: cuBLAS handles and plans
    times = {}
    for name, a in (("small", small), ("big", big)):
        be.synchronize()
        t0 = be.timer_start()
        a @ a
        times[name] = be.timer_stop(t0)
    assert 0 < times["small"] < times["big"]
    assert times["big"] > 2 * 4096 ** 3 / 1e16  # below 10 PFLOP/s: the kernel was really waited for


def test_kernels_compile_once_and_timing_excludes_compilation():
    x = rt.randn(512, 512, device="cuda", dtype=rt.float64)
    before = set(cache.cached())
    rt.nn.functional.mish(x)  # builds the float64 mish kernel (compiled on this first launch)
    built = set(cache.cached()) - before
    assert len(built) == 1 and all(k[0] == "elementwise" and k[1] == "float64" for k in built)
    rt.nn.functional.mish(x)
    assert set(cache.cached()) - before == built  # the second call reuses it

    model = rt.nn.Sequential(rt.nn.Conv2d(3, 8, 3, padding=1), rt.nn.GELU(), rt.nn.AdaptiveAvgPool2d(1)).cuda()
    report = flopcount.profile(model, rt.randn(2, 3, 32, 32, device="cuda"), mode="eager", latency=True, repeat=3)
    assert report.latency_ms is not None and 0 < report.latency_ms < 1000
    timed = [r for r in report.ops if r.latency_ms is not None]
    assert timed and all(r.latency_ms < 100 for r in timed)  # an NVRTC compile takes far longer


def test_profile_graph_on_gpu_times_nodes():
    model = rt.nn.Sequential(rt.nn.Linear(64, 64), rt.nn.SiLU(), rt.nn.Linear(64, 8)).cuda()
    report = flopcount.profile(model, rt.randn(16, 64, device="cuda"), mode="graph", latency=True,
                               backward=True, repeat=3)
    assert report.device.startswith("cuda")
    assert report.latency_ms is not None and report.latency_ms > 0
    assert all(r.latency_ms is not None for r in report.ops if r.phase == "forward")


def test_memory_peak_comes_from_the_pool():
    import cupy

    be = backend(rt.device("cuda"))
    with be.track_memory() as tracker:
        a = cupy.empty(10 * 2**20, dtype=cupy.uint8)
        b = cupy.empty(4 * 2**20, dtype=cupy.uint8)
        held = tracker.current()
        del a, b
        after = tracker.current()
    assert held >= 14 * 2**20
    assert after <= held - 14 * 2**20 + 4096
    assert 14 * 2**20 <= tracker.peak < 15 * 2**20


def test_measured_peak_next_to_the_prediction():
    model = rt.nn.Sequential(rt.nn.Conv2d(3, 16, 3, padding=1), rt.nn.ReLU(), rt.nn.Conv2d(16, 16, 3, padding=1),
                             rt.nn.ReLU(), rt.nn.Flatten(), rt.nn.Linear(16 * 32 * 32, 10)).cuda().eval()
    report = flopcount.profile(model, rt.randn(4, 3, 32, 32, device="cuda"), mode="graph", measure_memory=True)
    mem = report.memory
    assert mem.predicted_peak and mem.measured_peak and mem.measured_activation_peak
    # between ops the pool holds what liveness predicts (within the pool's 512-byte rounding);
    # the peak adds kernel temporaries (im2col columns)
    assert 0.9 * mem.predicted_peak <= mem.measured_activation_peak <= 1.1 * mem.predicted_peak + 2**16
    assert mem.measured_peak >= mem.measured_activation_peak
