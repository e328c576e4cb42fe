"""A linear and the ReLU or tanh GELU after it as one cuBLASLt matmul, in a graph's plain run on
a GPU (``graph/plain_run.py``, ``kernels/linalg.linear_activation``), without a GPU: the GPU's
kernels run on the stand-in CuPy (cuBLAS's GEMMs on numpy, our elementwise kernels recorded)
with cuBLASLt emulated by its plan's reference. Which graphs take the epilogue (ReLU and the
tanh GELU do; the erf GELU, a linear output read twice or returned does not), and the fused
results equal the two ops run on the CPU within each dtype's tolerance."""

import importlib
import types

import numpy as np
import pytest

import flopcount.runtime as rt
from fake_cupy import emulate_cublaslt, installed
from flopcount.runtime.cuda.backend import CUDABackend
from flopcount.runtime.cuda.kernels import linalg, paths
from flopcount.runtime.graph import plain_run
from flopcount.runtime.tensor import Tensor

device_mod = importlib.import_module("flopcount.runtime.device")
CUDA = rt.device("cuda")
OPS = rt.registered_ops()
TOL = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 1.6e-2}


@pytest.fixture
def gpu(monkeypatch):
    """The stand-in CuPy as the backend of device 'cuda', with cuBLASLt emulated; yields it and
    the list of cuBLASLt plans run."""
    with installed() as fake:
        fake.cuda.runtime = types.SimpleNamespace(getDevice=lambda: 0, setDevice=lambda i: None,
                                                  getDeviceCount=lambda: 1)
        monkeypatch.setitem(device_mod._BACKENDS, "cuda", CUDABackend(fake))
        yield fake, emulate_cublaslt(monkeypatch, fake)


class _ReadTwice(rt.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = rt.nn.Linear(16, 24)

    def forward(self, x):
        y = self.fc(x)
        return rt.nn.functional.relu(y) * y


class _Both(rt.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = rt.nn.Linear(16, 24)

    def forward(self, x):
        y = self.fc(x)
        return y, rt.nn.functional.relu(y)


MODELS = {  # name -> (module, the activations fused, in order)
    "relu": (lambda: rt.nn.Sequential(rt.nn.Linear(16, 24), rt.nn.ReLU()), ["relu"]),
    "gelu tanh": (lambda: rt.nn.Sequential(rt.nn.Linear(16, 24), rt.nn.GELU(approximate="tanh")), ["gelu_tanh"]),
    "no bias": (lambda: rt.nn.Sequential(rt.nn.Linear(16, 24, bias=False), rt.nn.ReLU()), ["relu"]),
    "mlp": (lambda: rt.nn.Sequential(rt.nn.Linear(16, 32), rt.nn.GELU(approximate="tanh"), rt.nn.Linear(32, 24),
                                     rt.nn.ReLU()), ["gelu_tanh", "relu"]),
    "gelu erf": (lambda: rt.nn.Sequential(rt.nn.Linear(16, 24), rt.nn.GELU()), []),
    "read twice": (_ReadTwice, []),
    "returned": (_Both, []),
}


def _on_gpu(module, x, dtype):
    """The traced graph of ``module`` and its plain run on the stand-in GPU: (program, outputs)."""
    graph = rt.trace(module, rt.tensor(x).to(dtype))
    fixed = {name: Tensor._make(graph.tensors[name].data, graph.tensors[name].shape, graph.tensors[name].dtype, CUDA)
             for name in list(graph.parameters) + list(graph.constants)}
    inputs = [Tensor._make(rt.tensor(x).to(dtype).data, x.shape, dtype, CUDA)]
    cache: dict = {}
    with rt.no_grad():
        assert plain_run.applies(graph, cache, inputs, None, None, False)
        outputs = plain_run.run(graph, cache, inputs, fixed)
    return cache["plain_program_cuda"], outputs


@pytest.mark.parametrize("name", list(MODELS))
def test_which_graphs_take_the_epilogue(gpu, name):
    fake, ran = gpu
    build, fused = MODELS[name]
    x = np.random.default_rng(0).standard_normal((2, 5, 16)).astype(np.float32)
    program, _ = _on_gpu(build(), x, rt.float32)
    assert [getattr(kernel, "activation", None) for _, kernel, *_ in program.steps if
            getattr(kernel, "activation", None)] == fused
    assert [p.epilogue & ~4 for p in ran] == [{"relu": 2, "gelu_tanh": 32}[a] for a in fused]
    # what is not fused runs as before: the linear's GEMM through cuBLAS, its activation our kernel
    linears = sum(node.op.name == "linear" for node, *_ in program.steps)
    assert len(fake.gemms) == linears - len(fused)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("name", ["relu", "gelu tanh", "no bias", "mlp"])
def test_the_fused_run_equals_the_two_ops_on_the_cpu(gpu, name, dtype):
    module = MODELS[name][0]()
    rt.manual_seed(0)
    x = np.random.default_rng(1).standard_normal((2, 5, 16)).astype(np.float32)
    want = module.to(getattr(rt, dtype))(rt.tensor(x).to(getattr(rt, dtype)))  # node by node, on the CPU
    _, (got,) = _on_gpu(module, x, getattr(rt, dtype))
    assert got.device == CUDA and got.dtype is want.dtype
    got64, want64 = (np.asarray(t.data).astype(np.float64) for t in (got, want))
    np.testing.assert_allclose(got64, want64, rtol=TOL[dtype], atol=TOL[dtype] * np.abs(want64).max())


def test_the_plain_run_leaves_no_path_noted_for_the_next_op(gpu):
    x = np.ones((3, 16), np.float32)
    paths.take()
    _on_gpu(MODELS["relu"][0](), x, rt.float32)
    assert paths.take() == paths.CUPY


def test_the_fused_kernel_names_cublaslt_and_without_it_runs_the_two_kernels(gpu, monkeypatch):
    fake, ran = gpu
    linear, gelu = OPS["linear"], OPS["gelu"]
    kernel = linalg.linear_activation(linear._kernel_by_device["cuda"], gelu._kernel_by_device["cuda"],
                                      {"approximate": "tanh"}, "gelu_tanh")
    x, w, b = np.ones((3, 16), np.float32), np.ones((24, 16), np.float32), np.ones(24, np.float32)
    paths.take()
    out = kernel(fake, x, w, b)
    assert paths.take() == "cuBLASLt" and len(ran) == 1 and not fake.gemms and not fake.elementwise
    np.testing.assert_array_equal(out, np.full((3, 24), 17, np.float32))  # gelu(17) is 17 in float32
    monkeypatch.setattr(linalg.cublaslt, "available", lambda xp: False)  # the library missing
    kernel(fake, x, w, b)
    assert paths.take() == "cuBLAS + own kernel" and len(ran) == 1 and len(fake.gemms) == 1
    assert "tanh_" in fake.elementwise[-1].spec["operation"]  # the tanh GELU, our generated kernel


def test_an_observed_run_keeps_the_two_ops(gpu):
    graph = rt.trace(MODELS["relu"][0](), rt.randn(3, 16))
    inputs = [Tensor._make(np.ones((3, 16), np.float32), (3, 16), rt.float32, CUDA)]
    with rt.no_grad():
        assert plain_run.applies(graph, {}, inputs, None, None, False)
        assert not plain_run.applies(graph, {}, inputs, lambda node, ins: None, None, False)
        mixed = inputs + [Tensor._make(np.ones(3, np.float32), (3,), rt.float32, rt.device("cpu"))]
        assert not plain_run.applies(graph, {}, mixed, None, None, False)


class _NoInputs(rt.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = rt.nn.Linear(16, 24)
        self.x = rt.nn.Parameter(rt.randn(3, 16))

    def forward(self):
        return rt.nn.functional.relu(self.fc(self.x))


def test_a_graph_without_inputs_runs_where_its_parameters_are(gpu):
    _, ran = gpu
    graph = rt.trace(_NoInputs())
    for name in graph.parameters:  # the graph moved to the GPU
        t = graph.tensors[name]
        graph.tensors[name] = Tensor._make(t.data, t.shape, t.dtype, CUDA)
    cache: dict = {}
    with rt.no_grad():
        assert plain_run.applies(graph, cache, [], None, None, False)
        (out,) = plain_run.run(graph, cache, [], dict(graph.tensors))
    assert out.device == CUDA and "plain_program_cuda" in cache and len(ran) == 1
