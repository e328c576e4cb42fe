"""Each op's report record names the library path its CUDA kernel took: the launchers note
cuBLAS and our own kernels (run here through the stand-in CuPy), the CUDA backend hands the
note to the dispatcher after each op, and the eager view's records carry it into the JSON."""

import json

import numpy as np

import flopcount
import flopcount.runtime as rt
from fake_cupy import installed
from flopcount.runtime.backend import CPUBackend
from flopcount.runtime.cuda.backend import CUDABackend
from flopcount.runtime.cuda.kernels import attention, linalg, paths, rowwise


def _generic(xp, *args, **kwargs):
    return "generic"


def test_the_backend_names_the_path_each_kernel_took():
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((4, 8)).astype(np.float16), rng.standard_normal((3, 8)).astype(np.float16)
    q = rng.standard_normal((1, 2, 4, 8)).astype(np.float32)
    with installed() as fake:
        be = CUDABackend(fake)
        paths.take()  # whatever earlier tests left
        linalg.linear(_generic)(fake, x, w)
        assert be.kernel_library() == "cuBLAS"
        rowwise.softmax(_generic)(fake, x, dim=-1)
        assert be.kernel_library() == "own kernel"
        sdpa = attention.forward(_generic)
        sdpa(fake, q, q, q, None, dropout_p=0.0, is_causal=True, scale=None, enable_gqa=False)
        assert be.kernel_library() == "own kernel"  # the flash-attention kernel
        mask = np.ones((4, 4), bool)
        sdpa(fake, q, q, q, mask, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False)
        assert be.kernel_library() == "cuBLAS + own kernel"  # two GEMMs around the softmax kernel
        ints = np.ones((2, 2), np.int64)
        assert linalg.matmul(_generic)(fake, ints, ints) == "generic"
        assert be.kernel_library() == "CuPy"
    assert CPUBackend().kernel_library() is None


def _profile_json(monkeypatch, library):
    monkeypatch.setattr(CPUBackend, "kernel_library", lambda self: library)
    model = rt.nn.Sequential(rt.nn.Linear(8, 4), rt.nn.ReLU())
    report = flopcount.profile(model, input_shape=(2, 8), mode="eager")
    return json.loads(report.to_json())["ops"]


def test_eager_records_carry_the_path_into_json_and_cpu_reports_keep_their_fields(monkeypatch):
    ops = _profile_json(monkeypatch, "cuBLAS")
    assert ops and all(op["library"] == "cuBLAS" for op in ops)
    ops = _profile_json(monkeypatch, None)
    assert ops and all("library" not in op for op in ops)


def test_graph_records_carry_the_path_of_each_node_when_timed(monkeypatch):
    monkeypatch.setattr(CPUBackend, "kernel_library", lambda self: "own kernel")
    model = rt.nn.Sequential(rt.nn.Linear(8, 4), rt.nn.ReLU())
    report = flopcount.profile(model, input_shape=(2, 8), mode="graph", latency=True, warmup=1, repeat=1)
    ops = json.loads(report.to_json())["ops"]
    assert ops and all(op["library"] == "own kernel" for op in ops)
    monkeypatch.undo()  # the CPU's backend has no paths: no extra run, no field
    ops = json.loads(flopcount.profile(model, input_shape=(2, 8), mode="graph", latency=True, warmup=1,
                                       repeat=1).to_json())["ops"]
    assert ops and all("library" not in op for op in ops)
