"""On a GPU: a linear and its ReLU or tanh GELU as one cuBLASLt matmul against the two ops it
replaces (cuBLAS's GEMM, then the activation's kernel) on the same arrays, in float32, float16
and bfloat16, with aligned and misaligned operands; and a graph's plain run on the GPU, which
fuses them, against the same model run on the CPU. Skipped without a GPU or libcublasLt."""

import numpy as np
import pytest

import flopcount.runtime as rt
from flopcount.runtime.cuda.kernels import cublaslt as lt, linalg, paths
from flopcount.runtime.graph import executor, plain_run

pytestmark = pytest.mark.gpu
OPS = rt.registered_ops()
ACTIVATIONS = {"relu": ("relu", {}), "gelu_tanh": ("gelu", {"approximate": "tanh"})}


@pytest.fixture
def cupy():
    import cupy

    if lt.library() is None:
        pytest.skip("libcublasLt.so.12 is not installed (pip install 'flopcount[cuda12]')")
    return cupy


def _np_dtype(dtype: str):
    from ml_dtypes import bfloat16

    return bfloat16 if dtype == "bfloat16" else np.dtype(dtype)


@pytest.mark.parametrize("dtype,tol", [("float32", 1e-4), ("float16", 1e-2), ("bfloat16", 5e-2)])
@pytest.mark.parametrize("activation", ["relu", "gelu_tanh"])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("offset", [0, 1])  # 1: x starts one element into its buffer (2- or 4-byte aligned)
def test_the_epilogue_equals_the_two_ops(cupy, dtype, tol, activation, bias, offset):
    rng = np.random.default_rng(0)
    host = rng.standard_normal(3 * 70 * 768 + offset).astype(_np_dtype(dtype))
    x = cupy.asarray(host)[offset:].reshape(3, 70, 768)
    w = cupy.asarray((rng.standard_normal((520, 768)) / 16).astype(_np_dtype(dtype)))
    b = cupy.asarray(rng.standard_normal(520).astype(_np_dtype(dtype))) if bias else None
    name, attrs = ACTIVATIONS[activation]
    linear, act = OPS["linear"]._kernel_by_device["cuda"], OPS[name]._kernel_by_device["cuda"]
    paths.take()
    got = linalg.linear_activation(linear, act, attrs, activation)(cupy, x, w, b)
    path = paths.take()
    assert path == "cuBLASLt" or offset  # a misaligned operand may find no algorithm: the two ops then
    want = act(cupy, linear(cupy, x, w, b), **attrs)
    got, want = (cupy.asnumpy(a).astype(np.float64) for a in (got, want))
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.abs(want).max())


def test_a_plain_graph_run_on_the_gpu_fuses_and_equals_the_cpu(cupy):
    rt.manual_seed(0)
    model = rt.nn.Sequential(rt.nn.Linear(64, 96), rt.nn.GELU(approximate="tanh"), rt.nn.Linear(96, 32),
                             rt.nn.ReLU())
    x = rt.randn(4, 64)
    with rt.no_grad():
        want = model(x)
        gm = rt.GraphModule(rt.trace(model, x)).to("cuda")
        xc = x.to("cuda")
        assert plain_run.applies(gm.graph, gm.cache, [xc], None, None, False)
        (got,) = plain_run.run(gm.graph, gm.cache, [xc], executor._fixed_tensors(gm, xc.device))
    steps = gm.cache["plain_program_cuda"].steps
    assert [getattr(k, "activation", None) for _, k, *_ in steps] == ["gelu_tanh", "relu"]
    np.testing.assert_allclose(np.asarray(got.to("cpu").data), np.asarray(want.data), rtol=1e-4, atol=1e-4)
