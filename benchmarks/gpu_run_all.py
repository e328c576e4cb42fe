"""Everything that needs a GPU, in one command, for a machine lent for a short while:

    python benchmarks/gpu_run_all.py            # from a checkout, on a machine with a GPU

Runs, in order, each with its own time limit so the whole stays under ten minutes (570 s):
the device-free CUDA checks (launch arguments; ``tests/runtime/cuda`` but the NVRTC compiles CI runs), the GPU
tests (``pytest -m gpu``: every op example forward and backward against the CPU, every zoo
model, per-op comparisons with PyTorch, CUDA-event timing, the memory pool's peak), then
``gpu_ops.py`` and ``gpu_models.py``, whose tables go into ``RESULTS.md``
(``--only`` names steps to run instead, among them the float16 and bfloat16 benchmarks, the
float16 ops with cuDNN turned off (``gpu_ops-float16-own``: our own convolution and attention
kernels), the GPU tests in bfloat16, ``calibrate-cuda`` and ``calibrated-prediction-cuda``
(``flopcount calibrate --device cuda`` through PyTorch, and models' predicted time against their
measured time on the GPU) and ``memcheck``, the op tests under compute-sanitizer). The
environment step says whether cuDNN is installed (``flopcount[cuda12]`` brings it). Output streams as it
comes; with ``$OUT`` set, each step's output is also written to ``$OUT/<step>.log``. A step that
fails or runs out of time does not stop the next. The closing summary gives each step's exit
status and seconds; the exit status is non-zero when any step failed.

Needs CuPy (``flopcount[cuda12]`` or ``[cuda13]``), pytest, hypothesis, and a CUDA build of
PyTorch with torchvision and transformers for the comparisons.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import pathlib
import subprocess
import sys
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent

# (name, command, seconds allowed)
STEPS = [
    ("environment", [sys.executable, "-c",
                     "import cupy, numpy, torch; from cupy_backends.cuda.libs import nvrtc; "
                     "d = cupy.cuda.runtime.getDeviceProperties(0); "
                     "print('GPU', d['name'].decode(), 'cc', d['major'], d['minor'], 'SMs', d['multiProcessorCount']); "
                     "print('CuPy', cupy.__version__, 'NVRTC', nvrtc.getVersion(), 'numpy', numpy.__version__, "
                     "'torch', torch.__version__, 'torch CUDA', torch.cuda.is_available()); "
                     "from flopcount.runtime.cuda.kernels import cudnn_frontend as fe; m = fe.module(); "
                     "print('cuDNN', m.backend_version() if m else 'absent: convolutions and attention on our kernels')"],
     30),
    # CI compiles every kernel source with NVRTC for sm_70/80/90 (several minutes on a few
    # cores): the GPU's minutes go to the launch checks here and to real runs
    ("device-free", [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/runtime/cuda",
                     "--ignore=tests/runtime/cuda/test_sources_compile.py"], 80),
    ("pytest-gpu", [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "gpu", "-rfEs",
                    "--durations=15", "-k", "not bfloat16"], 240),
    ("gpu_ops", [sys.executable, "benchmarks/gpu_ops.py"], 90),
    ("gpu_models", [sys.executable, "benchmarks/gpu_models.py"], 120),
]

# run only when named with --only: the GPU tests and the benchmarks in bfloat16, the benchmarks in
# float16, and every op example's kernels under compute-sanitizer's memcheck (out-of-bounds and
# misaligned accesses; many times slower)
EXTRA_STEPS = [
    ("pytest-gpu-bfloat16", [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "gpu", "-rfEs",
                             "-k", "bfloat16"], 150),
    ("gpu_ops-float16", [sys.executable, "benchmarks/gpu_ops.py", "--dtype", "float16"], 90),
    ("gpu_models-float16", [sys.executable, "benchmarks/gpu_models.py", "--dtype", "float16"], 120),
    ("gpu_ops-bfloat16", [sys.executable, "benchmarks/gpu_ops.py", "--dtype", "bfloat16"], 90),
    ("gpu_models-bfloat16", [sys.executable, "benchmarks/gpu_models.py", "--dtype", "bfloat16"], 120),
    # the same float16 ops on our own convolution and attention kernels, cuDNN turned off
    ("gpu_ops-float16-own", ["env", "FLOPCOUNT_CUDNN=0", sys.executable, "benchmarks/gpu_ops.py", "--dtype",
                             "float16"], 90),
    # issue 31 on the GPU: calibrate through PyTorch, then predict resnet50, vit_b_16, bert, gpt2 and a
    # llama-family decoder there and print predicted against measured (the quick suite, one round)
    ("calibrate-cuda", [sys.executable, "-m", "flopcount", "calibrate", "--device", "cuda", "--engine", "torch",
                        "--dtype", "float16", "--quick", "--rounds", "1", "--repeat", "3", "-q"], 120),
    ("calibrated-prediction-cuda", [sys.executable, "benchmarks/calibrated_prediction.py", "--engine", "torch",
                                    "--device", "cuda", "--dtype", "float16", "--rounds", "1", "--repeat", "5",
                                    "--models", "resnet50,vit_b_16,bert-base-uncased,gpt2,llama-1b"], 300),
    ("memcheck", ["compute-sanitizer", "--tool", "memcheck", "--error-exitcode", "1", sys.executable, "-m",
                  "pytest", "-q", "-x", "-p", "no:cacheprovider", "-m", "gpu", "tests/gpu/test_ops_gpu.py"], 540),
]


def run(name: str, command: list, limit: float, out_dir) -> tuple:
    """(exit status, or 'timeout', and seconds) of one step, its output streamed and logged."""
    print(f"\n===== {name} (limit {limit:.0f} s): {' '.join(command)}", flush=True)
    start = time.perf_counter()
    proc = subprocess.Popen(command, cwd=ROOT, env=dict(os.environ, PYTHONUNBUFFERED="1"),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    watchdog = threading.Timer(limit, proc.kill)  # a silent hang ends too
    watchdog.start()
    with open(out_dir / f"{name}.log", "w") if out_dir else contextlib.nullcontext() as log:
        for line in proc.stdout:
            sys.stdout.write(line)
            if log:
                log.write(line)
    code = proc.wait()
    timed_out = not watchdog.is_alive()
    watchdog.cancel()
    seconds = time.perf_counter() - start
    status = "timeout" if timed_out and code != 0 else code
    print(f"===== {name}: {'ok' if status == 0 else status} after {seconds:.0f} s", flush=True)
    return status, seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", choices=[name for name, _, _ in STEPS + EXTRA_STEPS],
                        help="run these steps only")
    args = parser.parse_args()
    out_dir = pathlib.Path(os.environ["OUT"]) if os.environ.get("OUT") else None
    results = []
    for name, command, limit in STEPS + EXTRA_STEPS:
        if (args.only and name not in args.only) or (not args.only and (name, command, limit) in EXTRA_STEPS):
            continue
        results.append((name, *run(name, command, limit, out_dir)))
    print("\n| step | status | seconds |\n|---|---|---|")
    for name, status, seconds in results:
        print(f"| {name} | {'ok' if status == 0 else status} | {seconds:.0f} |")
    return 0 if all(status == 0 for _, status, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main())
