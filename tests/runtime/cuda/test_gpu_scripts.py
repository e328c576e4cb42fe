"""The GPU benchmark scripts stay ready for the day a GPU is lent: they import, name only zoo
models and flopcount functions that exist, and their one-command runner fits the ten minutes
such a machine gives a command. (Running them needs the GPU; RESULTS.md says they never have.)"""

import importlib.util
import pathlib
import sys

import pytest

from flopcount import models

BENCHMARKS = pathlib.Path(__file__).resolve().parents[3] / "benchmarks"


def _script(name: str):
    sys.path.insert(0, str(BENCHMARKS))  # the scripts import gpu_common as a sibling
    try:
        spec = importlib.util.spec_from_file_location(f"_bench_{name}", BENCHMARKS / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(BENCHMARKS))


@pytest.mark.parametrize("name", ["gpu_common", "gpu_ops", "gpu_models", "gpu_run_all"])
def test_script_imports_and_has_a_main(name):
    module = _script(name)
    assert name == "gpu_common" or callable(module.main)


def test_benchmarked_models_are_in_the_zoo():
    for name, batch in _script("gpu_models").CASES:
        assert name in models.names() and batch >= 1


def test_what_the_timing_helpers_import_exists():
    from flopcount.recording.timing import time_calls

    assert callable(time_calls)


def test_the_one_command_run_fits_a_lent_machines_limit():
    script = _script("gpu_run_all")
    assert [s[0] for s in script.STEPS] == ["environment", "device-free", "pytest-gpu", "gpu_ops", "gpu_models"]
    assert sum(limit for _, _, limit in script.STEPS) <= 600
    assert all(limit <= 600 for _, _, limit in script.EXTRA_STEPS)


def test_the_benchmarks_and_gpu_tests_have_steps_in_every_half_precision_dtype():
    script = _script("gpu_run_all")
    extra = {name: command for name, command, _ in script.EXTRA_STEPS}
    for dtype in ("float16", "bfloat16"):
        for bench in ("gpu_ops", "gpu_models"):
            assert extra[f"{bench}-{dtype}"][-2:] == ["--dtype", dtype]
    default = {name: command for name, command, _ in script.STEPS}
    # the bfloat16 GPU tests have a step (and a limit) of their own; the default step leaves them out
    assert default["pytest-gpu"][-2:] == ["-k", "not bfloat16"] and extra["pytest-gpu-bfloat16"][-2:] == ["-k", "bfloat16"]


def test_the_float16_ops_have_a_step_on_our_own_kernels_with_cudnn_off():
    extra = {name: command for name, command, _ in _script("gpu_run_all").EXTRA_STEPS}
    own = extra["gpu_ops-float16-own"]
    assert own[:2] == ["env", "FLOPCOUNT_CUDNN=0"] and own[2:] == extra["gpu_ops-float16"]
