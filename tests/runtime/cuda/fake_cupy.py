"""A stand-in for CuPy that lets the CUDA launchers run on a machine without a GPU.

Array functions are numpy's, so a launcher handed numpy arrays and this module as ``xp`` takes
its GPU path (it is not ``numpy``) through the same layouts, casts and argument lists it builds
on a GPU. ``RawKernel`` and ``ElementwiseKernel`` compile and run nothing: they record each
launch (source, grid, block, arguments, shared memory) for the tests to check. Outputs of the
recorded kernels stay zero, so only what the launchers pass is meaningful, never what they get.
"""

from __future__ import annotations

import contextlib
import sys
import types
from dataclasses import dataclass

import numpy as np

from flopcount.runtime.cuda.kernels import cache


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


class FakeCupy(types.ModuleType):
    """``import cupy`` while installed: numpy's array API plus recording kernels."""

    def __init__(self):
        super().__init__("cupy")
        self.launches: list = []
        self.elementwise: list = []

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
    try:
        yield fake
    finally:
        cache.clear()  # the stand-in's kernels must not outlive it
        if saved is None:
            sys.modules.pop("cupy", None)
        else:
            sys.modules["cupy"] = saved
