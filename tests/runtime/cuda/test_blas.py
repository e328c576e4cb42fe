"""The cuBLAS GEMMs (``kernels/blas.py``) without a GPU: the argument construction against
values derived by hand, the reference GEMM against a loop written from BLAS's definition, every
plan run on numpy against ``a @ b`` (so the plan computes the product, for every layout, batch
broadcast and dtype), the stand-in CuPy's recorded cuBLAS calls, and the names, values and
signatures of CuPy's bindings the launcher calls."""

import doctest
import importlib.util
import inspect
import re

import numpy as np
import pytest
from ml_dtypes import bfloat16

import cuda_compile
import flopcount.runtime as rt
from fake_cupy import FakeCublas, installed
from flopcount.runtime.cuda.kernels import blas, flash_attention, linalg, paths
from flopcount.runtime.cuda.kernels.blas import OP_N, OP_T, Operand

N, T = OP_N, OP_T


def _gemm_loops(transa, transb, m, n, k, A, lda, B, ldb, C, ldc, beta=0.0):
    """BLAS's xGEMM by its definition, on flat column-major buffers, one element at a time:
    C(i, j) = sum_p op(A)(i, p)·op(B)(p, j) + beta·C(i, j), where X(r, c) = X[r + c·ld]."""
    def op_a(i, p):
        return A[i + p * lda] if transa == N else A[p + i * lda]

    def op_b(p, j):
        return B[p + j * ldb] if transb == N else B[j + p * ldb]

    for i in range(m):
        for j in range(n):
            total = sum(float(op_a(i, p)) * float(op_b(p, j)) for p in range(k))
            C[i + j * ldc] = total + beta * float(C[i + j * ldc])


def _plan(transa, transb, m, n, k, lda, ldb, ldc, beta=0.0, dtype="float64"):
    return blas.GemmPlan(transa, transb, m, n, k, lda, ldb, ldc, 0, 0, 0, 1, blas.DATA_TYPES[dtype],
                         blas.compute_type(dtype), beta)


@pytest.mark.parametrize("transa,transb", [(N, N), (N, T), (T, N), (T, T)])
def test_the_reference_gemm_is_blas_by_its_definition(transa, transb):
    rng = np.random.default_rng(1)
    m, n, k, lda, ldb, ldc = 3, 4, 5, 7, 6, 5  # leading dims beyond the stored rows: gaps are skipped
    A, B = rng.standard_normal(lda * 5), rng.standard_normal(ldb * 5)
    C0 = rng.standard_normal(ldc * n)
    want, got = C0.copy(), C0.copy()
    _gemm_loops(transa, transb, m, n, k, A, lda, B, ldb, want, ldc, beta=1.0)
    blas.reference_gemm(_plan(transa, transb, m, n, k, lda, ldb, ldc, beta=1.0), A, B, got)
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_the_reference_gemm_refuses_what_cublas_refuses_and_addresses_outside_a_buffer():
    A, B, C = np.zeros(6), np.zeros(6), np.zeros(4)
    with pytest.raises(blas.GemmArgumentError, match="lda = 1 is below max.1, 2."):
        blas.reference_gemm(_plan(N, N, 2, 2, 3, 1, 3, 2), A, B, C)
    with pytest.raises(blas.GemmArgumentError, match="ldc = 1"):
        blas.reference_gemm(_plan(N, N, 2, 2, 3, 2, 3, 1), A, B, C)
    with pytest.raises(blas.GemmArgumentError, match="B is addressed at element 6 of a buffer of 6"):
        blas.reference_gemm(_plan(N, N, 2, 2, 3, 2, 4, 2), A, B, C)
    overlapping = blas.GemmPlan(N, N, 2, 2, 3, 2, 3, 2, 0, 0, 2, 2, blas.CUDA_R_64F, blas.COMPUTE_64F)
    with pytest.raises(blas.GemmArgumentError, match="two elements of C share an address"):
        blas.reference_gemm(overlapping, np.zeros(6), np.zeros(6), np.zeros(8))


# --- the plan, derived by hand -------------------------------------------------------------------

def _plan_of(a, b, bias=False, allow_tf32=False):
    batch = tuple(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]))
    op_a = blas.operand_of(a.shape, blas.element_strides(a), batch)
    op_b = blas.operand_of(b.shape, blas.element_strides(b), batch)
    if op_a is None or op_b is None:
        return None
    return blas.plan(op_a, op_b, a.shape[-2], a.shape[-1], b.shape[-1], int(np.prod(batch)), str(a.dtype),
                     bias=bias, allow_tf32=allow_tf32)


def _fields(p):
    return (p.transa, p.transb, p.m, p.n, p.k, p.lda, p.ldb, p.ldc, p.stride_a, p.stride_b, p.stride_c, p.batch)


def test_a_plain_gemm_swaps_the_operands_and_m_and_n():
    # row-major C (5 x 3) = A (5 x 4) B (4 x 3) is column-major Cᵀ (3 x 5) = Bᵀ (3 x 4) Aᵀ (4 x 5):
    # cuBLAS's A is b stored as its transpose (ld 3 = n), its B is a (ld 4 = k), ldc = n
    p = _plan_of(np.zeros((5, 4), np.float32), np.zeros((4, 3), np.float32))
    assert _fields(p) == (N, N, 3, 5, 4, 3, 4, 3, 0, 0, 0, 1)
    assert (p.data_type, p.compute_type, p.beta, p.algo) == (blas.CUDA_R_32F, blas.COMPUTE_32F, 0.0, -1)


def test_linear_reads_the_weight_transposed_and_folds_the_rows_into_one_gemm():
    # x (2, 6, 16) @ weight (8, 16).T: weight.T has strides (1, 16), so cuBLAS reads the weight
    # as stored with op T (ld 16); the 12 rows of x are one (12 x 16) matrix (ld 16)
    x, w = np.zeros((2, 6, 16), bfloat16), np.zeros((8, 16), bfloat16)
    p = _plan_of(x, w.T, bias=True)
    assert _fields(p) == (T, N, 8, 12, 16, 16, 16, 8, 0, 0, 0, 1)
    assert (p.data_type, p.compute_type, p.beta) == (blas.CUDA_R_16BF, blas.COMPUTE_32F, 1.0)


def test_a_batched_gemm_strides_each_operand_and_broadcasts_with_stride_zero():
    a, b = np.zeros((3, 5, 4), np.float16), np.zeros((3, 4, 2), np.float16)
    assert _fields(_plan_of(a, b)) == (N, N, 2, 5, 4, 2, 4, 2, 8, 20, 10, 3)
    # b broadcast over a's batch of 3, but a transposed: no fold, b's stride is 0
    at = np.zeros((3, 4, 5), np.float16).swapaxes(-1, -2)
    assert _fields(_plan_of(at, np.zeros((1, 4, 2), np.float16))) == (N, T, 2, 5, 4, 2, 5, 2, 0, 20, 10, 3)
    # two batch dims that collapse into one stride, one operand broadcast along both
    a2 = np.zeros((2, 3, 5, 4), np.float16)
    assert _fields(_plan_of(a2, np.zeros((2, 3, 4, 2), np.float16))) == (N, N, 2, 5, 4, 2, 4, 2, 8, 20, 10, 6)
    assert _fields(_plan_of(np.zeros((1, 1, 5, 4), np.float16), np.zeros((2, 3, 4, 2), np.float16))) \
        == (N, N, 2, 5, 4, 2, 4, 2, 8, 0, 10, 6)


def test_layouts_cublas_cannot_read_need_a_copy():
    a = np.zeros((6, 8), np.float32)[::2, ::2]  # neither rows nor columns contiguous
    assert _plan_of(a, np.zeros((4, 3), np.float32)) is None
    # a (2, 1) batch broadcast to (2, 3): no single stride walks it
    assert blas.operand_of((2, 1, 5, 4), (20, 20, 4, 1), (2, 3)) is None
    assert blas.operand_of((5, 4), (-4, 1), ()) is None  # a negative stride


def test_dims_of_size_one_get_leading_dimensions_cublas_accepts():
    # a single row: its row stride is meaningless, ld becomes the row's length
    assert blas.matrix_operand(1, 4, 999, 1, 0) == Operand(N, 4, 0)
    # a single column taken from a wider matrix: contiguous along its one column, ld = the row stride
    assert blas.matrix_operand(5, 1, 7, 1, 0) == Operand(N, 7, 0)
    # a column-major single row, e.g. the transpose of a (4, 1) column
    assert blas.matrix_operand(1, 4, 1, 1, 0) == Operand(N, 4, 0)


@pytest.mark.parametrize("dtype,tf32,data,compute", [
    ("float16", False, blas.CUDA_R_16F, blas.COMPUTE_32F), ("bfloat16", False, blas.CUDA_R_16BF, blas.COMPUTE_32F),
    ("float32", False, blas.CUDA_R_32F, blas.COMPUTE_32F), ("float32", True, blas.CUDA_R_32F, blas.COMPUTE_32F_FAST_TF32),
    ("float16", True, blas.CUDA_R_16F, blas.COMPUTE_32F), ("float64", True, blas.CUDA_R_64F, blas.COMPUTE_64F)])
def test_types_16_bit_storage_float32_accumulation_and_tf32_only_for_float32_when_allowed(dtype, tf32, data, compute):
    p = blas.plan(Operand(N, 4, 0), Operand(N, 4, 0), 2, 4, 4, 1, dtype, allow_tf32=tf32)
    assert (p.data_type, p.compute_type) == (data, compute)


def test_tf32_is_off_unless_the_environment_or_the_setting_turns_it_on(monkeypatch):
    monkeypatch.delenv("FLOPCOUNT_ALLOW_TF32", raising=False)
    assert blas.Settings().allow_tf32 is False
    monkeypatch.setenv("FLOPCOUNT_ALLOW_TF32", "1")
    assert blas.Settings().allow_tf32 is True
    monkeypatch.setenv("FLOPCOUNT_ALLOW_TF32", "0")
    assert blas.Settings().allow_tf32 is False
    monkeypatch.setattr(blas.settings, "allow_tf32", True)
    with installed() as fake:
        blas.matmul(fake, np.ones((2, 3), np.float32), np.ones((3, 2), np.float32))
        blas.matmul(fake, np.ones((2, 3), np.float16), np.ones((3, 2), np.float16))
    assert [g.plan.compute_type for g in fake.gemms] == [blas.COMPUTE_32F_FAST_TF32, blas.COMPUTE_32F]


# --- every plan computes the product --------------------------------------------------------------

def _layouts(rng, dtype):
    """(a, b, bias) pairs in the layouts GEMMs meet: contiguous, transposed views, row slices
    (leading dim beyond the row), batch broadcasts of every kind, sizes 0 and 1, k = 0."""
    def r(*shape):
        return rng.standard_normal(shape).astype(dtype)

    yield r(5, 4), r(4, 3), None
    yield r(5, 4), r(3, 4).T, r(3)                                   # linear
    yield r(2, 6, 16), r(8, 16).T, r(8)                              # linear on a batch: one tall GEMM
    yield r(2, 6, 16).transpose(1, 0, 2), r(8, 16).T, None           # rows not one after the other
    yield r(4, 5).T, r(3, 4).T, None                                 # both transposed
    yield r(5, 9)[:, 2:6], r(4, 7)[:, 1:4], None                     # ld beyond the row
    yield r(3, 5, 4), r(3, 4, 2), None
    yield r(3, 4, 5).swapaxes(1, 2), r(1, 4, 2), None                # broadcast b, transposed a
    yield r(2, 1, 5, 4), r(3, 4, 2), None                            # needs a broadcast copy
    yield r(2, 3, 5, 4), r(4, 2), r(2)
    yield r(4, 3, 5, 8).transpose(0, 2, 1, 3)[..., :4], r(4, 1, 4, 2), None   # attention heads split off
    yield r(1, 4), r(4, 1), None
    yield r(5, 1), r(1, 3), None
    yield r(5, 0), r(0, 3), r(3)                                     # k = 0: the bias alone
    yield r(0, 4), r(4, 3), None
    yield r(2, 0, 5, 4), r(4, 3), None


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16, bfloat16])
def test_every_plan_run_on_numpy_computes_a_at_b(dtype):
    rng = np.random.default_rng(0)
    tol = {np.float64: 1e-12, np.float32: 1e-5, np.float16: 2e-3, bfloat16: 2e-2}[dtype]
    for a, b, bias in _layouts(rng, dtype):
        got = blas.matmul(np, a, b, bias)
        want = np.matmul(a.astype(np.float64), b.astype(np.float64)) + (0 if bias is None else bias.astype(np.float64))
        assert got.dtype == a.dtype and got.shape == want.shape, (a.shape, b.shape)
        np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=tol * max(1, a.shape[-1]),
                                   err_msg=f"{a.shape} strides {a.strides} @ {b.shape} strides {b.strides}")


def test_sizes_beyond_cublas_ints_are_left_to_the_caller(monkeypatch):
    # a stack of 3 x 4 rows folds into one GEMM of 12 rows: beyond a (lowered) 32-bit limit of 11
    monkeypatch.setattr(blas, "INT_MAX", 11)
    a, w = np.ones((3, 4, 2), np.float32), np.ones((5, 2), np.float32)
    assert blas.matmul(np, a, w.T) is None
    assert blas.matmul(np, a[:2], w.T).shape == (2, 4, 5)


def test_other_dtypes_are_left_to_the_caller():
    ints = np.ones((2, 2), np.int64)
    assert blas.matmul(np, ints, ints) is None
    assert blas.matmul(np, np.ones((2, 2), np.float32), np.ones((2, 2), np.float64)) is None
    assert linalg.matmul(lambda xp, a, b: "generic")(np, ints, ints) == "generic"


# --- the calls made through the stand-in CuPy --------------------------------------------------------

@pytest.mark.parametrize("dtype,code", [(np.float16, blas.CUDA_R_16F), (bfloat16, blas.CUDA_R_16BF),
                                        (np.float32, blas.CUDA_R_32F), (np.float64, blas.CUDA_R_64F)])
def test_linear_and_batched_matmul_make_one_cublas_call_each_in_their_dtype(dtype, code):
    rng = np.random.default_rng(2)
    x, w, bias = (rng.standard_normal(s).astype(dtype) for s in ((2, 6, 16), (8, 16), (8,)))
    a, b = (rng.standard_normal(s).astype(dtype) for s in ((3, 5, 4), (3, 4, 2)))
    with installed() as fake:
        y = linalg.linear(None)(fake, x, w, bias)
        z = linalg.matmul(None)(fake, a, b)
    assert [g.plan.batch for g in fake.gemms] == [1, 3]  # gemmEx, then gemmStridedBatchedEx
    for call in fake.gemms:
        assert call.types == (code, code, code)  # 16-bit in, 16-bit out: never widened
        assert call.alpha.dtype == call.beta.dtype == (np.float64 if dtype is np.float64 else np.float32)
    assert fake.gemms[0].beta == 1 and fake.gemms[1].beta == 0
    assert np.shares_memory(fake.gemms[0].arrays[0], w)  # the weight itself, not a transposed copy
    tol = 3e-2 if dtype in (np.float16, bfloat16) else 1e-5
    np.testing.assert_allclose(y.astype(np.float64), (x.astype(np.float64) @ w.T.astype(np.float64)) + bias,
                               rtol=tol, atol=tol)
    np.testing.assert_allclose(z.astype(np.float64), a.astype(np.float64) @ b.astype(np.float64), rtol=tol, atol=tol)


# --- CuPy 14's bindings --------------------------------------------------------------------------------

def _cupy_cublas_binary() -> str:
    try:
        spec = importlib.util.find_spec("cupy_backends.cuda.libs.cublas")
    except Exception as exc:  # ImportError, or CUDA libraries missing when CuPy loads
        cuda_compile.unavailable(f"CuPy is not importable ({exc})")
    if spec is None:
        cuda_compile.unavailable("CuPy has no cupy_backends.cuda.libs.cublas")
    return spec.origin


def _declared(binary: str, name: str) -> list:
    """The parameter names CuPy's compiled module declares for ``name`` (Cython embeds each
    signature in the module's docstrings, readable without loading libcublas)."""
    text = open(binary, "rb").read().decode("latin-1")
    found = re.search(rf"\b{name}\(intptr_t handle[^)]*\)", text)
    assert found, f"CuPy's cuBLAS bindings declare no {name}"
    return [param.split()[-1] for param in found.group(0)[len(name) + 1:-1].split(",")]


@pytest.mark.parametrize("name", ["gemmEx", "gemmStridedBatchedEx", "setStream"])
def test_cupys_cublas_binding_takes_the_arguments_the_launcher_passes(name):
    binary = _cupy_cublas_binary()
    if name == "setStream":
        assert "setStream" in open(binary, "rb").read().decode("latin-1")
        return
    declared = _declared(binary, name)
    stand_in = list(inspect.signature(getattr(FakeCublas, name)).parameters)[1:]
    assert declared == stand_in


def test_the_enum_values_are_cudas():
    try:
        from cupy_backends.cuda.api import runtime
    except Exception as exc:
        cuda_compile.unavailable(f"CuPy is not importable ({exc})")
    assert {name: getattr(runtime, f"CUDA_R_{name}") for name in ("16F", "16BF", "32F", "64F")} == \
        {"16F": blas.CUDA_R_16F, "16BF": blas.CUDA_R_16BF, "32F": blas.CUDA_R_32F, "64F": blas.CUDA_R_64F}
    try:
        from cupy_backends.cuda.libs import cublas
    except ImportError as exc:  # libcublas is not installed (CI's CUDA environment has no GPU libraries)
        pytest.skip(f"cuBLAS is not loadable here ({exc}); the enum values are cuBLAS's headers'")
    assert (cublas.CUBLAS_OP_N, cublas.CUBLAS_OP_T, cublas.CUBLAS_GEMM_DEFAULT) == (OP_N, OP_T, blas.GEMM_DEFAULT)
    assert (cublas.CUBLAS_COMPUTE_32F, cublas.CUBLAS_COMPUTE_32F_FAST_TF32, cublas.CUBLAS_COMPUTE_64F) == \
        (blas.COMPUTE_32F, blas.COMPUTE_32F_FAST_TF32, blas.COMPUTE_64F)
    for name in ("gemmEx", "gemmStridedBatchedEx"):
        params = re.search(rf"{name}\(([^)]*)\)", getattr(cublas, name).__doc__).group(1)
        assert [p.split()[-1] for p in params.split(",")] == list(inspect.signature(getattr(FakeCublas, name)).parameters)[1:]


@pytest.mark.parametrize("module", [blas, paths, flash_attention])
def test_docstring_examples(module, monkeypatch):
    monkeypatch.delenv("FLOPCOUNT_ALLOW_TF32", raising=False)
    monkeypatch.setattr(blas.settings, "allow_tf32", False)
    paths.take()  # what earlier tests left
    failures, tried = doctest.testmod(module, extraglobs={"rt": rt})
    assert tried and not failures
