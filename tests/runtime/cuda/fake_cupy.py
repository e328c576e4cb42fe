"""A stand-in for CuPy that lets the CUDA launchers run on a machine without a GPU.

Array functions are numpy's, so a launcher handed numpy arrays and this module as ``xp`` takes
its GPU path (it is not ``numpy``) through the same layouts, casts and argument lists it builds
on a GPU. ``RawKernel`` and ``ElementwiseKernel`` compile and run nothing: they record each
launch (source, grid, block, arguments, shared memory) for the tests to check. Outputs of the
recorded kernels stay zero, so only what the launchers pass is meaningful, never what they get.

cuBLAS (``cuda.cublas``) is the exception: its ``gemmEx`` and ``gemmStridedBatchedEx`` record
their arguments and run them through ``blas.reference_gemm`` (cuBLAS's semantics and argument
checks on numpy), so a GEMM's result is real. A device pointer is the index of the array in
``pointed`` (``blas.device_pointer`` is replaced while the stand-in is installed).
"""

from __future__ import annotations

import contextlib
import ctypes
import sys
import types
from dataclasses import dataclass

import numpy as np

from flopcount.runtime.cuda.kernels import blas, cache


@dataclass
class Launch:
    """One call of a raw kernel."""

    name: str
    code: str
    grid: tuple
    block: tuple
    args: tuple
    shared_mem: int


@dataclass
class ElementwiseCall:
    """One call of a generated elementwise kernel, with the arguments it was built from."""

    spec: dict
    arrays: tuple


class FakeRawKernel:
    def __init__(self, fake, code: str, name: str, options=(), **kwargs):
        self.fake, self.code, self.name, self.options = fake, code, name, options

    def compile(self):
        pass

    def __call__(self, grid, block, args, *, shared_mem=0):
        self.fake.launches.append(Launch(self.name, self.code, tuple(grid), tuple(block), tuple(args), shared_mem))


class FakeElementwiseKernel:
    def __init__(self, fake, in_params, out_params, operation, name="kernel", preamble="", **kwargs):
        self.fake = fake
        self.spec = {"in_params": in_params, "out_params": out_params, "operation": operation, "name": name,
                     "preamble": preamble}

    def __call__(self, *arrays):
        self.fake.elementwise.append(ElementwiseCall(self.spec, arrays))
        shape = np.broadcast_shapes(*(np.shape(a) for a in arrays))
        return np.zeros(shape, dtype=np.result_type(*arrays))


@dataclass
class GemmCall:
    """One cuBLAS GEMM: its plan as passed, the arrays behind cuBLAS's A, B and C, and the
    alpha and beta host scalars."""

    plan: blas.GemmPlan
    arrays: tuple
    alpha: np.ndarray
    beta: np.ndarray
    types: tuple  # (Atype, Btype, Ctype)


class FakeCublas:
    """``cupy_backends.cuda.libs.cublas``'s GEMM entry points, run on numpy (their signatures as
    CuPy 14 declares them; tests/runtime/cuda/test_blas.py checks them against CuPy's)."""

    def __init__(self, fake):
        self.fake = fake

    def setStream(self, handle, stream):  # noqa: N802 (CuPy's name)
        assert handle == FakeCupy.HANDLE and stream == FakeCupy.STREAM

    def gemmEx(self, handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb,  # noqa: N802,N803
               beta, C, Ctype, ldc, computeType, algo):  # noqa: N803
        self.gemmStridedBatchedEx(handle, transa, transb, m, n, k, alpha, A, Atype, lda, 0, B, Btype, ldb, 0,
                                  beta, C, Ctype, ldc, 0, 1, computeType, algo)

    def gemmStridedBatchedEx(self, handle, transa, transb, m, n, k, alpha, A, Atype, lda, strideA,  # noqa: N802,N803
                             B, Btype, ldb, strideB, beta, C, Ctype, ldc, strideC, batchCount,  # noqa: N803
                             computeType, algo):  # noqa: N803
        assert handle == FakeCupy.HANDLE
        scalar = np.float64 if computeType == blas.COMPUTE_64F else np.float32
        alpha_v, beta_v = (np.ctypeslib.as_array((ctypes.c_char * scalar().itemsize).from_address(p)).view(scalar)[0]
                           for p in (alpha, beta))
        plan = blas.GemmPlan(transa, transb, m, n, k, lda, ldb, ldc, strideA, strideB, strideC, batchCount,
                             Atype, computeType, float(beta_v), algo)
        a, b, c = (self.fake.pointed[p] for p in (A, B, C))
        self.fake.gemms.append(GemmCall(plan, (a, b, c), alpha_v, beta_v, (Atype, Btype, Ctype)))
        assert alpha_v == 1, alpha_v
        assert c.flags.c_contiguous
        blas.reference_gemm(plan, blas.footprint(a), blas.footprint(b), c.reshape(-1))


class FakeCupy(types.ModuleType):
    """``import cupy`` while installed: numpy's array API plus recording kernels."""

    def __init__(self):
        super().__init__("cupy")
        self.launches: list = []
        self.elementwise: list = []
        self.gemms: list = []
        self.pointed: list = []  # arrays whose device pointer a launcher took, by "address"
        fake = self
        self.cuda = types.SimpleNamespace(
            cublas=FakeCublas(self),
            device=types.SimpleNamespace(get_cublas_handle=lambda: FakeCupy.HANDLE),
            get_current_stream=lambda: types.SimpleNamespace(ptr=FakeCupy.STREAM))
        self.device_pointer = lambda array: fake._point(array)

    HANDLE, STREAM = 7001, 7002  # what a handle and a stream pointer look like: plain ints

    def _point(self, array) -> int:
        self.pointed.append(array)
        return len(self.pointed) - 1

    def __getattr__(self, name):  # anything not defined here is numpy's
        return getattr(np, name)

    def RawKernel(self, code, name, options=(), **kwargs):  # noqa: N802 (CuPy's name)
        return FakeRawKernel(self, code, name, options, **kwargs)

    def ElementwiseKernel(self, in_params, out_params, operation, name="kernel", **kwargs):  # noqa: N802
        return FakeElementwiseKernel(self, in_params, out_params, operation, name, **kwargs)

    # CuPy's matmul keeps its operands' dtype (cuBLAS); numpy's turns bfloat16 into float32
    @staticmethod
    def matmul(a, b, **kwargs):
        return np.matmul(a, b, **kwargs).astype(np.result_type(a, b), copy=False)

    # zeros rather than uninitialized memory: no NaN warnings from the arithmetic that follows
    @staticmethod
    def empty(shape, dtype=float, order="C"):
        return np.zeros(shape, dtype=dtype, order=order)

    @staticmethod
    def empty_like(a, dtype=None, order="K", shape=None):
        return np.zeros_like(a, dtype=dtype, order=order, shape=shape)


@contextlib.contextmanager
def installed():
    """A fresh ``FakeCupy`` as ``cupy`` (and an empty kernel cache) for the block."""
    fake = FakeCupy()
    saved = sys.modules.get("cupy")
    cache.clear()
    sys.modules["cupy"] = fake
    device_pointer, blas.device_pointer = blas.device_pointer, fake.device_pointer
    try:
        yield fake
    finally:
        blas.device_pointer = device_pointer
        cache.clear()  # the stand-in's kernels must not outlive it
        if saved is None:
            sys.modules.pop("cupy", None)
        else:
            sys.modules["cupy"] = saved


def emulate_cudnn(monkeypatch, execute) -> None:
    """cuDNN as if installed: every graph 'planned' is its key, and running it is ``execute``
    (the test's emulation of the graph by its definition, on numpy)."""
    from flopcount.runtime.cuda.kernels import cudnn_frontend

    monkeypatch.setattr(cudnn_frontend, "available", lambda xp: True)
    monkeypatch.setattr(cudnn_frontend, "plan", lambda key, build, restrict=None: key)
    monkeypatch.setattr(cudnn_frontend, "execute", execute)


def emulate_cublaslt(monkeypatch, fake) -> list:
    """cuBLASLt as if installed, for launchers handed ``fake``: each matmul runs its plan through
    ``cublaslt.reference`` on the arrays behind the device pointers. Returns the list the plans
    run are appended to."""
    from flopcount.runtime.cuda.kernels import cublaslt, paths

    ran = []

    def matmul(xp, p, a, b, bias, out):
        ran.append(p)
        cublaslt.reference(p, blas.footprint(a), blas.footprint(b), bias, out.reshape(-1))
        paths.ran(paths.CUBLASLT)
        return True

    monkeypatch.setattr(cublaslt, "available", lambda xp: xp is fake)
    monkeypatch.setattr(cublaslt, "_matmul", matmul)
    return ran
