"""Running a script as on a CPU with AVX2 and FMA but not AVX-512 (the compiled kernels' 8-float
variants), or as on one without any vector fused multiply-add, as an ARM or an old x86 CPU is
for these kernels (their fallbacks): the host's features with those turned off, for numba too."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

_WITHOUT = """
import llvmlite.binding as llvm
host_features = llvm.get_host_cpu_features
def without_some():
    features = host_features()
    for name in list(features):
        if name.startswith({prefixes!r}):
            features[name] = False
    return features
llvm.get_host_cpu_features = without_some
"""


def run_without_avx512(script: str, cache_dir) -> str:
    """The stripped stdout of ``script`` (dedented) run in a fresh interpreter that sees no
    AVX-512; numba's cache in ``cache_dir``, apart from the 16-float kernels'. Skips where the
    CPU has no AVX2 and FMA."""
    import llvmlite.binding as llvm

    features = llvm.get_host_cpu_features()
    if not (features.get("avx2") and features.get("fma")):
        pytest.skip("this CPU has no AVX2 and FMA")
    return _run_without(("avx512",), script, cache_dir)


def run_without_vector_fma(script: str, cache_dir) -> str:
    """As ``run_without_avx512``, on a CPU with neither AVX2 nor FMA nor AVX-512."""
    return _run_without(("avx512", "avx2", "fma"), script, cache_dir)


def _run_without(prefixes: tuple, script: str, cache_dir) -> str:
    code = _WITHOUT.format(prefixes=prefixes) + textwrap.dedent(script)
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache_dir))
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()
