"""cuBLASLt's linear epilogue (``kernels/cublaslt.py``) without a GPU: the plan against values
derived by hand, every plan run on numpy (``reference``) against the linear and activation it
replaces computed in float64, the enum values and call signatures against the header of the
installed ``nvidia-cublas-cu12`` wheel, and the descriptors and layouts built for real through
the library (host-only calls, no device) and read back. The library parts skip without it."""

import ctypes
import re
from pathlib import Path

import numpy as np
import pytest
from ml_dtypes import bfloat16

from fake_cupy import installed
from flopcount.runtime.cuda.kernels import blas, cublaslt as lt, paths
from flopcount.runtime.cuda.kernels.blas import OP_N, OP_T, Operand

TOL = {np.float32: 1e-5, np.float16: 2e-3, bfloat16: 1.6e-2}


def _truth(x, w, b, activation):
    """The linear and its activation in float64, from the definitions."""
    y = x.astype(np.float64) @ w.astype(np.float64).T + (0 if b is None else b.astype(np.float64))
    if activation == "relu":
        return np.maximum(y, 0)
    if activation == "gelu_tanh":
        return 0.5 * y * (1 + np.tanh(np.sqrt(2 / np.pi) * (y + 0.044715 * y ** 3)))
    return y


def test_the_plan_of_a_linear_by_hand():
    # x (6, 5) row-major is cuBLAS's (5 x 6) column-major B, read as it is; weight (4, 5) is its
    # A, read transposed (op T: stored 5 x 4); D is the (4 x 6) column-major output, our (6, 4)
    p = lt.plan(Operand(OP_N, 5, 0), Operand(OP_T, 5, 0), rows=6, k=5, n=4, dtype="float16",
                activation="gelu_tanh", bias=True, pointers=(4096, 2048 + 16, 8, 0))
    g = p.gemm
    assert (g.transa, g.transb, g.m, g.n, g.k, g.data_type, g.compute_type) == (OP_T, OP_N, 4, 6, 5, 2, 68)
    assert p.layouts() == {"A": (5, 4, 5), "B": (5, 6, 5), "D": (4, 6, 4)}
    assert p.epilogue == 32 | 4 and p.alignment == (256, 16, 8, 256)


@pytest.mark.parametrize("activation, bias, expected", [
    ("relu", True, 6), ("gelu_tanh", True, 36), (None, True, 4), ("relu", False, 2), ("gelu_tanh", False, 32),
    (None, False, 1)])
def test_epilogues(activation, bias, expected):
    assert lt.epilogue(activation, bias) == expected


def test_tf32_is_the_compute_type_only_when_allowed():
    args = (Operand(OP_N, 8, 0), Operand(OP_T, 8, 0), 2, 8, 3, "float32", "relu", True)
    assert lt.plan(*args).gemm.compute_type == blas.COMPUTE_32F
    assert lt.plan(*args, allow_tf32=True).gemm.compute_type == blas.COMPUTE_32F_FAST_TF32


@pytest.mark.parametrize("dtype", [np.float32, np.float16, bfloat16], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("activation", ["relu", "gelu_tanh", None])
@pytest.mark.parametrize("case", ["rows", "one row", "stack", "strided x", "no bias", "strided bias"])
def test_every_plan_computes_the_linear_and_its_activation(dtype, activation, case):
    rng = np.random.default_rng(3)
    shapes = {"rows": (7, 16), "one row": (16,), "stack": (2, 3, 16), "strided x": (16, 9), "no bias": (5, 16),
              "strided bias": (4, 16)}
    x = rng.standard_normal(shapes[case]).astype(dtype)
    if case == "strided x":  # columns of a (16, 9): x is read from a copy
        x = x.T
    w = rng.standard_normal((24, 16)).astype(dtype)
    b = None if case == "no bias" else rng.standard_normal(48 if case == "strided bias" else 24).astype(dtype)
    if case == "strided bias":  # every other element: read from a copy
        b = b[::2]
    got = lt.linear_epilogue(np, x, w, b, activation)
    assert got.dtype == np.dtype(dtype) and got.shape == x.shape[:-1] + (24,)
    want = _truth(x, w, b, activation)
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=TOL[dtype], atol=TOL[dtype] * np.abs(want).max())


def test_the_epilogue_rounds_once():
    # bias and relu are applied to the float32 accumulator: 2048 + 1 + 0.5 rounds once in
    # float16 (to 2050: ties to even at a spacing of 2), where rounding after the GEMM (2049 ->
    # 2048) and again after the bias gives 2048
    x, w, b = np.array([[2048.0, 1.0]], np.float16), np.array([[1.0, 1.0]], np.float16), np.array([0.5], np.float16)
    assert lt.linear_epilogue(np, x, w, b, "relu")[0, 0] == 2050


@pytest.mark.parametrize("case", ["float64", "int32", "bias dtype", "empty", "activation"])
def test_what_it_does_not_take_is_left_to_the_two_ops(case):
    x, w, b = np.ones((2, 3), np.float32), np.ones((4, 3), np.float32), np.ones(4, np.float32)
    activation = "relu"
    if case in ("float64", "int32"):
        x, w, b = x.astype(case), w.astype(case), b.astype(case)
    elif case == "bias dtype":
        b = b.astype(np.float16)
    elif case == "empty":
        x = np.ones((0, 3), np.float32)
    else:
        activation = "gelu"  # the erf GELU: cuBLASLt has none
    assert lt.linear_epilogue(np, x, w, b, activation) is None


def test_without_the_library_a_gpu_array_is_left_to_the_two_ops(monkeypatch):
    monkeypatch.setitem(lt._STATE, "library", None)
    x, w = np.ones((2, 3), np.float32), np.ones((4, 3), np.float32)
    with installed() as fake:
        paths.take()
        assert not lt.available(fake)
        assert lt.linear_epilogue(fake, x, w, None, "relu") is None
        assert paths.take() == paths.CUPY and not fake.gemms


def test_turned_off_it_is_not_available(monkeypatch):
    monkeypatch.setattr(lt.settings, "enabled", False)
    with installed() as fake:
        assert not lt.available(fake)
    assert not lt.available(np)


# --- the installed library -----------------------------------------------------------------------

def _header() -> str:
    path = Path(lt.library_path()).parent.parent / "include" / "cublasLt.h"
    if not path.exists():
        pytest.skip("nvidia-cublas-cu12 (with cublasLt.h) is not installed")
    return path.read_text()


def _enum(header: str, name: str) -> int:
    """An enumerator's value in the header, its ``A | B`` expressions evaluated."""
    expr = re.search(rf"\b{name}\s*=\s*([^,\n]+),", header).group(1)
    expr = re.sub(r"/\*.*?\*/", "", expr).strip().strip("()")
    return eval(re.sub(r"\b(CUBLASLT_\w+)", lambda m: str(_enum(header, m.group(1))), expr))  # noqa: S307


def test_the_enum_values_are_the_headers():
    header = _header()
    ours = {"CUBLASLT_MATMUL_DESC_COMPUTE_TYPE": lt.DESC_COMPUTE_TYPE, "CUBLASLT_MATMUL_DESC_TRANSA": lt.DESC_TRANSA,
            "CUBLASLT_MATMUL_DESC_TRANSB": lt.DESC_TRANSB, "CUBLASLT_MATMUL_DESC_EPILOGUE": lt.DESC_EPILOGUE,
            "CUBLASLT_MATMUL_DESC_BIAS_POINTER": lt.DESC_BIAS_POINTER,
            "CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE": lt.DESC_BIAS_DATA_TYPE,
            "CUBLASLT_MATRIX_LAYOUT_TYPE": lt.LAYOUT_TYPE, "CUBLASLT_MATRIX_LAYOUT_ROWS": lt.LAYOUT_ROWS,
            "CUBLASLT_MATRIX_LAYOUT_COLS": lt.LAYOUT_COLS, "CUBLASLT_MATRIX_LAYOUT_LD": lt.LAYOUT_LD,
            "CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES": lt.PREF_MAX_WORKSPACE_BYTES,
            "CUBLASLT_EPILOGUE_DEFAULT": lt.epilogue(None, False),
            "CUBLASLT_EPILOGUE_BIAS": lt.epilogue(None, True), "CUBLASLT_EPILOGUE_RELU": lt.epilogue("relu", False),
            "CUBLASLT_EPILOGUE_RELU_BIAS": lt.epilogue("relu", True),
            "CUBLASLT_EPILOGUE_GELU": lt.epilogue("gelu_tanh", False),
            "CUBLASLT_EPILOGUE_GELU_BIAS": lt.epilogue("gelu_tanh", True)}
    ours.update({f"CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_{role}_BYTES": v for role, v in lt.PREF_MIN_ALIGNMENT.items()})
    assert {name: _enum(header, name) for name in ours} == ours
    api = (Path(lt.library_path()).parent.parent / "include" / "cublas_api.h").read_text()
    assert _enum(api.replace("CUBLAS_STATUS", "CUBLASLT_STATUS"), "CUBLASLT_STATUS_NOT_SUPPORTED") == \
        lt.STATUS_NOT_SUPPORTED


def test_the_binding_declares_every_call_with_the_headers_parameters():
    header = _header()
    for name, argtypes in lt.SIGNATURES.items():
        params = re.search(rf"cublasStatus_t CUBLASWINAPI {name}\(([^;]*?)\);", header, re.S).group(1)
        params = re.sub(r"/\*.*?\*/|//[^\n]*", "", params)
        assert len(params.split(",")) == len(argtypes), name


def test_the_heuristic_result_has_the_headers_layout():
    # cublasLtMatmulHeuristicResult_t: algo (64 bytes), workspaceSize, state, wavesCount, int[4]
    assert ctypes.sizeof(lt.HeuristicResult) == 64 + 8 + 4 + 4 + 16
    assert "} cublasLtMatmulHeuristicResult_t;" in _header()


@pytest.fixture
def lib():
    found = lt.library()
    if found is None:
        pytest.skip("libcublasLt.so.12 is not installed (pip install nvidia-cublas-cu12)")
    return found


@pytest.mark.parametrize("dtype, tf32, data_type, compute", [
    ("float16", False, 2, 68), ("bfloat16", False, 14, 68), ("float32", False, 0, 68), ("float32", True, 0, 77)])
@pytest.mark.parametrize("activation, bias", [("relu", True), ("gelu_tanh", True), ("relu", False)])
def test_descriptors_and_layouts_built_by_the_library_read_back_as_planned(lib, dtype, tf32, data_type, compute,
                                                                          activation, bias):
    p = lt.plan(Operand(OP_N, 768, 0), Operand(OP_T, 768, 0), rows=4096, k=768, n=3072, dtype=dtype,
                activation=activation, bias=bias, pointers=(512, 512, 512, 256), allow_tf32=tf32)
    d = lt.describe(lib, p)
    try:
        desc = {attr: lib.get("cublasLtMatmulDescGetAttribute", d.desc, attr, ctype) for attr, ctype in (
            (lt.DESC_COMPUTE_TYPE, ctypes.c_int32), (lt.DESC_TRANSA, ctypes.c_int32), (lt.DESC_TRANSB, ctypes.c_int32),
            (lt.DESC_EPILOGUE, ctypes.c_uint32), (lt.DESC_BIAS_DATA_TYPE, ctypes.c_int32))}
        assert desc == {lt.DESC_COMPUTE_TYPE: compute, lt.DESC_TRANSA: OP_T, lt.DESC_TRANSB: OP_N,
                        lt.DESC_EPILOGUE: lt.epilogue(activation, bias), lt.DESC_BIAS_DATA_TYPE: data_type}
        read = {role: tuple(lib.get("cublasLtMatrixLayoutGetAttribute", layout, attr, ctype) for attr, ctype in (
            (lt.LAYOUT_TYPE, ctypes.c_uint32), (lt.LAYOUT_ROWS, ctypes.c_uint64), (lt.LAYOUT_COLS, ctypes.c_uint64),
            (lt.LAYOUT_LD, ctypes.c_int64))) for role, layout in d.layouts.items()}
        assert read == {"A": (data_type, 768, 3072, 768), "B": (data_type, 768, 4096, 768),
                        "D": (data_type, 3072, 4096, 3072)}
    finally:
        lt.destroy(lib, d)


def test_a_refused_call_names_itself_and_its_status(lib):
    d = lt.describe(lib, lt.plan(Operand(OP_N, 4, 0), Operand(OP_T, 4, 0), 2, 4, 3, "float32", "relu", True))
    try:
        with pytest.raises(lt.CublasLtError, match=r"cublasLtMatmulDescSetAttribute returned "
                                                   r"CUBLAS_STATUS_INVALID_VALUE \(7\)"):
            lib.set("cublasLtMatmulDescSetAttribute", d.desc, lt.DESC_EPILOGUE, ctypes.c_uint64(6))  # 8 bytes, not 4
    finally:
        lt.destroy(lib, d)
