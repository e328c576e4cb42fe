"""Running a script as on a CPU with AVX2 and FMA but not AVX-512: the compiled kernels' 8-float
variants, compiled for such a CPU (the host's features without AVX-512, for numba too)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

_WITHOUT_AVX512 = """
import llvmlite.binding as llvm
host_features = llvm.get_host_cpu_features
def without_avx512():
    features = host_features()
    for name in list(features):
        if name.startswith("avx512"):
            features[name] = False
    return features
llvm.get_host_cpu_features = without_avx512
"""


def run_without_avx512(script: str, cache_dir) -> str:
    """The stripped stdout of ``script`` (dedented) run in a fresh interpreter that sees no
    AVX-512; numba's cache in ``cache_dir``, apart from the 16-float kernels'. Skips where the
    CPU has no AVX2 and FMA."""
    import llvmlite.binding as llvm

    features = llvm.get_host_cpu_features()
    if not (features.get("avx2") and features.get("fma")):
        pytest.skip("this CPU has no AVX2 and FMA")
    code = _WITHOUT_AVX512 + textwrap.dedent(script)
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache_dir))
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()
