"""What the GPU benchmarks share: the requirements check, the ``--dtype`` option, CUDA-event
timing of flopcount and of PyTorch, the device's measured matmul rate, and the printed table."""

from __future__ import annotations

import pathlib
import statistics
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))  # run from a checkout

WARMUP = 3
REPEAT = 20


def parse_dtype(description: str) -> str:
    """The ``--dtype`` the benchmark runs in: float32 (default), float16, or bfloat16 once the
    runtime has it."""
    import argparse

    import flopcount.runtime as rt

    choices = [name for name in ("float32", "float16", "bfloat16") if hasattr(rt, name)]
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--dtype", choices=choices, default="float32")
    return parser.parse_args().dtype


def require():
    """(flopcount.runtime, torch) on a GPU machine, or exit with what is missing."""
    import flopcount.runtime as rt

    if not rt.cuda.is_available():
        sys.exit("needs CuPy and an NVIDIA GPU: pip install 'flopcount[cuda12]'")
    try:
        import torch
    except ImportError:
        sys.exit("needs PyTorch with CUDA for the comparison: pip install torch")
    if not torch.cuda.is_available():
        sys.exit("needs a CUDA build of PyTorch (torch.cuda.is_available() is False)")
    # float32 arithmetic on both sides: no TF32 in cuBLAS or cuDNN (CuPy uses none by default)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    return rt, torch


def time_flopcount(fn, warmup: int = WARMUP, repeat: int = REPEAT) -> float:
    """Median milliseconds of ``fn()`` between two CUDA events, after ``warmup`` calls (which
    also compile every kernel ``fn`` launches)."""
    import flopcount.runtime as rt
    from flopcount.recording.timing import time_calls

    return statistics.median(time_calls(fn, rt.device("cuda"), warmup, repeat)) * 1e3


def time_torch(fn, warmup: int = WARMUP, repeat: int = REPEAT) -> float:
    """Median milliseconds of ``fn()`` between two torch CUDA events, after ``warmup`` calls."""
    import torch

    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(repeat):
        torch.cuda.synchronize()
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        samples.append(start.elapsed_time(stop))
    return statistics.median(samples)


def matmul_tflops(n: int = 8192, dtype: str = "float32") -> float:
    """The device's rate on a large cuBLAS matmul in ``dtype`` (one GEMM as the runtime calls it:
    CuPy's matmul has no bfloat16), in TFLOP/s, measured in this run."""
    import cupy

    import flopcount.runtime as rt
    from flopcount.runtime.cuda.kernels import blas

    a = cupy.random.default_rng(0).standard_normal((n, n), dtype=cupy.float32).astype(getattr(rt, dtype).np)
    ms = time_flopcount(lambda: blas.matmul(cupy, a, a), warmup=2, repeat=10)
    return 2 * n ** 3 / (ms * 1e-3) / 1e12


def print_table(title: str, rows: list, peak: float, dtype: str = "float32") -> None:
    """rows: (case, flopcount ms, torch ms or None, FLOPs of the case)."""
    import torch

    print(f"\n{title}, {dtype}, on {torch.cuda.get_device_name()} — median of {REPEAT} CUDA-event-timed "
          f"runs after {WARMUP} warm-up; matmul rate measured in this run: {peak:.1f} TFLOP/s ({dtype})\n")
    head = f"| {'case':<42} | {'flopcount ms':>12} | {'torch ms':>9} | {'ratio':>6} | {'TFLOP/s':>8} | {'of matmul':>9} |"
    print(head)
    print("|" + "|".join("-" * (len(c)) for c in head.split("|")[1:-1]) + "|")
    for case, ours, theirs, flops in rows:
        rate = flops / (ours * 1e-3) / 1e12 if flops else None
        print(f"| {case:<42} | {ours:>12.3f} | {_num(theirs, '9.3f'):>9} | "
              f"{_num(ours / theirs if theirs else None, '6.2f'):>6} | {_num(rate, '8.2f'):>8} | "
              f"{_num(100 * rate / peak if rate else None, '8.1f%'):>9} |")


def _num(value, fmt: str) -> str:
    if value is None:
        return "n/a"
    return format(value, fmt[:-1]) + "%" if fmt.endswith("%") else format(value, fmt)


def flops_of(fn) -> int:
    """FLOPs flopcount's cost rules give for what ``fn()`` dispatches (COUNTING.md)."""
    import flopcount.runtime as rt

    class Sum:
        total = 0

        def on_op(self, event):
            Sum.total += event.cost.flops

    with rt.observe(Sum()):
        fn()
    return Sum.total
