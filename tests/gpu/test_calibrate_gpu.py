"""``flopcount calibrate --device cuda``: the suite on the GPU with each engine, read against the
datasheet of the part the driver names, and a model predicted from it."""

import pytest

import flopcount
from flopcount.calibrate import calibrate
from flopcount.hardware.devices import datasheet_for


def _engine_sees_a_gpu(engine: str) -> str:
    if engine == "torch":
        torch = pytest.importorskip("torch")
        if not torch.cuda.is_available():
            pytest.skip("this torch has no CUDA device")
        return torch.cuda.get_device_name(0)
    import cupy

    return cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()


@pytest.mark.parametrize("engine,dtype", [("flopcount", "float32"), ("torch", "float16")])
def test_a_gpu_calibration_gives_every_class_a_curve_and_predicts_a_model(engine, dtype):
    gpu = _engine_sees_a_gpu(engine)
    base = datasheet_for(gpu) or "h100-sxm"
    profile = calibrate(engine=engine, device="cuda", dtype=dtype, base=base, quick=True, repeat=2, rounds=1)
    suffix = "" if dtype == "float32" else f"-{dtype}"
    assert profile.name == f"{base}-{engine}{suffix}" and profile.calibration["gpu"] == gpu
    assert {"matmul", "conv", "attention", "elementwise", "norm"} <= set(profile.curves)
    for kind, curve in profile.curves.items():
        assert all(measured > 0 for _, measured in curve), kind
    report = flopcount.profile("resnet18", batch=2, device="cuda", dtype=dtype, hardware=profile)
    predicted = [r.predicted_ms for r in report.by_op("forward") if r.macs]
    assert predicted and all(p > 0 for p in predicted)
