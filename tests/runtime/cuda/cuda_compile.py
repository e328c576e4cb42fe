"""NVRTC compilation as CuPy does it on a GPU, on a machine without one.

CuPy compiles a ``RawKernel`` with ``compile_with_cache``: its compiler options (C++17, its own
and CUDA's include directories), ``-ftz=true``, ``--device-as-default-execution-space`` and
``-arch=sm_XY`` for the device (a cubin, so ptxas runs too). An ``ElementwiseKernel`` is the
same after CuPy wraps the operation in its generated kernel, behind its headers. Only the
architecture comes from a device, so here it is named: ``ARCHS`` are the V100, A100 and H100.
``-Xptxas=-v`` adds each kernel's registers, shared memory and spills to NVRTC's log.

Needs ``cupy-cuda12x``, ``nvidia-cuda-nvrtc-cu12`` and ``nvidia-cuda-runtime-cu12`` (the
headers), not a GPU. Without them, or for an architecture the installed NVRTC no longer builds
(CUDA 13 dropped sm_70), the tests skip, unless ``FLOPCOUNT_REQUIRE_NVRTC=1`` (as ``.ci/run``
sets) makes that a failure.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass

import numpy as np
import pytest

ARCHS = ("sm_70", "sm_80", "sm_90")
REQUIRE = "FLOPCOUNT_REQUIRE_NVRTC"

COMPILED: Counter = Counter()  # (kind: "raw" or "elementwise", arch) -> sources compiled, for the summary


class NvrtcError(AssertionError):
    """A source NVRTC refused: its log, then the source lines the log names."""


@dataclass(frozen=True)
class Resources:
    """What ptxas reports for one kernel."""

    registers: int
    shared: int          # static shared memory, bytes
    spill_stores: int    # bytes


def unavailable(reason: str):
    if os.environ.get(REQUIRE):
        pytest.fail(f"{reason}, and {REQUIRE} is set")
    pytest.skip(reason)


def _toolchain():
    """(cupy.cuda.compiler, nvrtc, CuPy's compiler options), or skip/fail saying what is missing."""
    try:
        from cupy._core import core
        from cupy.cuda import compiler
        from cupy_backends.cuda.libs import nvrtc
    except Exception as exc:  # ImportError, or CUDA libraries missing when CuPy loads
        unavailable(f"CuPy is not importable ({exc})")
    try:
        nvrtc.getVersion()
    except Exception as exc:
        unavailable(f"NVRTC is not available ({exc})")
    try:
        options = core.assemble_cupy_compiler_options(())
    except Exception as exc:  # no CUDA headers
        unavailable(f"CuPy finds no CUDA headers ({exc})")
    return compiler, nvrtc, options + ("-ftz=true", "--device-as-default-execution-space")


def version() -> tuple:
    """NVRTC's (major, minor)."""
    return _toolchain()[1].getVersion()


def _excerpt(log: str, source: str, filename: str) -> str:
    lines = source.splitlines()
    named = sorted({int(n) for n in re.findall(rf"{re.escape(filename)}\((\d+)\)", log)})
    out = []
    for n in named:
        for i in range(max(1, n - 2), min(len(lines), n + 1) + 1):
            out.append(f"{'>' if i == n else ' '}{i:5d}: {lines[i - 1]}")
        out.append("")
    return "\n".join(out)


def compile_source(source: str, arch: str, what: str = "", kind: str = "raw",
                   filename: str = "kernel.cu") -> dict:
    """Compile ``source`` for ``arch``: ``{kernel name: Resources}``, or ``NvrtcError`` with
    NVRTC's log and the source lines it names."""
    compiler, nvrtc, options = _toolchain()
    if int(arch.split("_")[-1]) not in nvrtc.getSupportedArchs():  # CUDA 13's NVRTC has no sm_70
        unavailable(f"NVRTC {nvrtc.getVersion()} does not compile for {arch}")
    program = compiler._NVRTCProgram(source, filename, method="cubin")
    try:
        program.compile(options + (f"-arch={arch}", "-Xptxas=-v"))
    except compiler.CompileException as exc:
        log = exc.get_message()
        raise NvrtcError(f"NVRTC refused {what or filename} for {arch}:\n{log}\n"
                         f"{_excerpt(log, source, filename)}") from None
    COMPILED[kind, arch] += 1
    return resources(nvrtc.getProgramLog(program.ptr))


def resources(log: str) -> dict:
    """``{kernel: Resources}`` from ptxas's verbose lines in an NVRTC log."""
    out = {}
    for name, block in re.findall(r"Function properties for (\w+)\n(.*?)(?=Function properties for|\Z)", log, re.S):
        regs = re.search(r"Used (\d+) registers", block)
        smem = re.search(r"(\d+) bytes smem", block)
        spill = re.search(r"(\d+) bytes spill stores", block)
        out[name] = Resources(int(regs.group(1)) if regs else 0, int(smem.group(1)) if smem else 0,
                              int(spill.group(1)) if spill else 0)
    return out


def _numpy_dtype(dtype) -> np.dtype:
    if str(dtype) == "bfloat16":  # numpy knows the name once ml_dtypes is imported
        try:
            import ml_dtypes
        except ImportError:
            unavailable("bfloat16 kernels need ml_dtypes")
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(dtype)


def elementwise_source(spec: dict, dtype, ndim: int = 1) -> str:
    """The CUDA source CuPy generates for ``cupy.ElementwiseKernel(**spec)`` called on C-contiguous
    arrays of ``dtype`` with ``ndim`` dims, behind the headers CuPy puts in front of it.

    This reads CuPy's own code generator (``cupy._core._kernel``), which is not public API: if a
    CuPy release changes it, this function is what to update."""
    import cupy
    from cupy._core import _carray, _kernel, core

    dtype = _numpy_dtype(dtype)
    kernel = cupy.ElementwiseKernel(**spec)
    ndarray, indexer = 1, 2  # cupy._core._kernel's _ArgKind values
    arrays = [p for p in kernel.params if p.name != "_ind"]
    args = tuple(_kernel._ArgInfo(ndarray, cupy.ndarray, dtype, ndim, True, True) for _ in arrays)
    args += (_kernel._ArgInfo(indexer, _carray.Indexer, None, ndim, True, True),)
    types = _kernel._TypeMap((("T", dtype),))
    code = _kernel._get_elementwise_kernel_code(args, types, kernel.params, kernel.operation, kernel.name,
                                                kernel.preamble)
    return "".join(f"#include <{h}>\n" for h in core._cupy_header_list) + code
