"""Linear, its bias and its activation in one GEMM: cuBLASLt's matmul with an epilogue.

``cublasGemmEx`` (``blas``) adds linear's bias by starting C as the broadcast bias (one more
pass over the output), and a ReLU or GELU after it is another kernel reading and writing the
whole output again. cuBLASLt applies the bias and the activation in the GEMM's epilogue, on
the float32 accumulator before the one rounding to the output dtype: ``CUBLASLT_EPILOGUE_BIAS``,
``RELU_BIAS`` and ``GELU_BIAS`` (and ``RELU`` / ``GELU`` without a bias). cuBLASLt's GELU is the
tanh approximation, so only ``gelu(approximate="tanh")`` takes it; the erf GELU keeps its own
kernel.

CuPy 14 has no cuBLASLt bindings, so this is a small ctypes binding of the calls used (each
status checked: an error names the call and the status). The library is ``libcublasLt.so.12``
from the ``nvidia-cublas-cu12`` wheel (or the system's); without it, or with
``FLOPCOUNT_CUBLASLT=0``, ``linear_epilogue`` returns None and the caller runs its two ops.

The arguments are pure data (``plan``: blas's GEMM plan, the epilogue and the pointers'
alignments), tested without a GPU; the descriptors and layouts are host objects, so they are
built and read back through the library without a device too. Only the handle, the heuristic's
choice and the matmul need one. A plan's descriptors and chosen algorithm are kept per plan,
as the cuDNN graphs are. Handed numpy arrays, ``linear_epilogue`` runs its plan through
``reference`` (cuBLAS's GEMM semantics, then the epilogue in float32), so CPU tests check it.
"""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass
from math import prod
from pathlib import Path

import numpy as np

from . import _source, blas, paths

# cublasLt.h's enum values (nvidia-cublas-cu12 12.9's header; tests check them where it is installed)
DESC_COMPUTE_TYPE, DESC_TRANSA, DESC_TRANSB, DESC_EPILOGUE, DESC_BIAS_POINTER, DESC_BIAS_DATA_TYPE = 0, 3, 4, 7, 8, 26
LAYOUT_TYPE, LAYOUT_ROWS, LAYOUT_COLS, LAYOUT_LD = 0, 2, 3, 4
PREF_MAX_WORKSPACE_BYTES, PREF_MIN_ALIGNMENT = 1, {"A": 5, "B": 6, "C": 7, "D": 8}
EPILOGUE_RELU, EPILOGUE_BIAS, EPILOGUE_GELU = 2, 4, 32
STATUS_NOT_SUPPORTED = 15
WORKSPACE_BYTES = 4 << 20  # what PyTorch lets cuBLASLt use on Hopper
ACTIVATIONS = {None: 0, "relu": EPILOGUE_RELU, "gelu_tanh": EPILOGUE_GELU}
DATA_TYPES = ("float16", "bfloat16", "float32")


@dataclass(frozen=True)
class EpiloguePlan:
    """One ``cublasLtMatmul``: blas's column-major GEMM (m = output features, n = rows), its
    epilogue, and the alignment in bytes of A, B, D (C is D) and the bias that the heuristic
    may assume."""

    gemm: blas.GemmPlan
    epilogue: int
    alignment: tuple

    def layouts(self) -> dict:
        """(rows, cols, ld) of A, B and D as stored, column-major (before their ops)."""
        g = self.gemm
        a = (g.m, g.k) if g.transa == blas.OP_N else (g.k, g.m)
        b = (g.k, g.n) if g.transb == blas.OP_N else (g.n, g.k)
        return {"A": a + (g.lda,), "B": b + (g.ldb,), "D": (g.m, g.n, g.ldc)}


def epilogue(activation: str | None, bias: bool) -> int:
    """cuBLASLt's epilogue for ``activation`` ("relu", "gelu_tanh" or None) with or without a bias.

    >>> epilogue("relu", True), epilogue("gelu_tanh", True), epilogue(None, True), epilogue("relu", False)
    (6, 36, 4, 2)
    """
    return (ACTIVATIONS[activation] | (EPILOGUE_BIAS if bias else 0)) or 1  # 1: CUBLASLT_EPILOGUE_DEFAULT


def alignment(pointer: int) -> int:
    """The largest power of two up to 256 (cuBLASLt's default assumption) dividing ``pointer``.

    >>> alignment(1024), alignment(6), alignment(0)
    (256, 2, 256)
    """
    return min(256, pointer & -pointer) if pointer else 256


def plan(x_op: blas.Operand, w_op: blas.Operand, rows: int, k: int, n: int, dtype, activation: str | None,
         bias: bool, pointers: tuple = (0, 0, 0, 0), allow_tf32: bool = False) -> EpiloguePlan:
    """The matmul of ``x (rows, k) @ weight.T (k, n)`` with ``activation`` after the bias, from
    the operands as cuBLAS reads them and the device addresses of (weight, x, out, bias).

    >>> x, w = blas.Operand(blas.OP_N, 64, 0), blas.Operand(blas.OP_T, 64, 0)   # weight (32, 64), read transposed
    >>> p = plan(x, w, rows=8, k=64, n=32, dtype="bfloat16", activation="relu", bias=True, pointers=(512, 256, 64, 2))
    >>> p.layouts(), p.epilogue, p.alignment
    ({'A': (64, 32, 64), 'B': (64, 8, 64), 'D': (32, 8, 32)}, 6, (256, 256, 64, 2))
    """
    gemm = blas.plan(x_op, w_op, rows, k, n, 1, dtype, allow_tf32=allow_tf32)
    return EpiloguePlan(gemm, epilogue(activation, bias), tuple(alignment(p) for p in pointers))


def reference(p: EpiloguePlan, a: np.ndarray, b: np.ndarray, bias, out: np.ndarray) -> None:
    """``cublasLtMatmul`` of plan ``p`` on flat numpy buffers (cuBLAS's A, B and the bias), alpha
    1, beta 0: the GEMM accumulated in float32, the bias added and the activation applied there,
    then one rounding into ``out`` (column-major m x n, i.e. our row-major (rows, n))."""
    acc = np.zeros(out.size, dtype=np.float32)
    blas.reference_gemm(p.gemm, a, b, acc)
    y = acc.reshape(p.gemm.n, p.gemm.m)
    if p.epilogue & EPILOGUE_BIAS:
        y = y + bias.astype(np.float32)
    if p.epilogue & EPILOGUE_RELU:
        y = np.maximum(y, np.float32(0))
    elif p.epilogue & EPILOGUE_GELU:
        from ...registry import get_op   # the gelu op's own tanh formula (ops import these kernels)

        y = get_op("gelu").forward(np, y, approximate="tanh")
    out.reshape(y.shape)[...] = y.astype(out.dtype)


# --- the library ---------------------------------------------------------------------------------

class CublasLtError(RuntimeError):
    """A cuBLASLt call that returned a status other than success."""


class HeuristicResult(ctypes.Structure):
    # cublasLtMatmulHeuristicResult_t: the algorithm (cublasLtMatmulAlgo_t, 8 uint64), its
    # workspace, status, waves count and reserved ints
    _fields_ = [("algo", ctypes.c_uint64 * 8), ("workspace_size", ctypes.c_size_t), ("state", ctypes.c_int),
                ("waves_count", ctypes.c_float), ("reserved", ctypes.c_int * 4)]


_P, _V, _I, _S = ctypes.POINTER, ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t
SIGNATURES = {  # argtypes of each call used; every one returns a cublasStatus_t
    "cublasLtCreate": [_P(_V)],
    "cublasLtMatmulDescCreate": [_P(_V), _I, _I],
    "cublasLtMatmulDescDestroy": [_V],
    "cublasLtMatmulDescSetAttribute": [_V, _I, _V, _S],
    "cublasLtMatmulDescGetAttribute": [_V, _I, _V, _S, _P(_S)],
    "cublasLtMatrixLayoutCreate": [_P(_V), _I, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_int64],
    "cublasLtMatrixLayoutDestroy": [_V],
    "cublasLtMatrixLayoutGetAttribute": [_V, _I, _V, _S, _P(_S)],
    "cublasLtMatmulPreferenceCreate": [_P(_V)],
    "cublasLtMatmulPreferenceDestroy": [_V],
    "cublasLtMatmulPreferenceSetAttribute": [_V, _I, _V, _S],
    "cublasLtMatmulAlgoGetHeuristic": [_V, _V, _V, _V, _V, _V, _V, _I, _P(HeuristicResult), _P(_I)],
    "cublasLtMatmul": [_V, _V, _V, _V, _V, _V, _V, _V, _V, _V, _V, _V, _V, _V, _S, _V],
}


class Library:
    """libcublasLt through ctypes: ``call(name, *args)`` raises ``CublasLtError`` naming the
    call and the status unless it succeeded."""

    def __init__(self, path: str):
        self.cdll = ctypes.CDLL(path)
        for name, argtypes in SIGNATURES.items():
            fn = getattr(self.cdll, name)
            fn.argtypes, fn.restype = argtypes, ctypes.c_int
        self.cdll.cublasLtGetStatusName.argtypes, self.cdll.cublasLtGetStatusName.restype = [_I], ctypes.c_char_p

    def call(self, name: str, *args) -> None:
        self.check(name, getattr(self.cdll, name)(*args))

    def check(self, name: str, status: int) -> None:
        if status != 0:
            label = (self.cdll.cublasLtGetStatusName(status) or b"?").decode()
            raise CublasLtError(f"cuBLASLt: {name} returned {label} ({status})")

    def create(self, name: str, *args) -> int:
        """A new opaque object (descriptor, layout, preference, handle) from a Create call."""
        out = _V()
        self.call(name, ctypes.byref(out), *args)
        return out.value

    def set(self, name: str, obj: int, attr: int, value) -> None:
        self.call(name, obj, attr, ctypes.byref(value), ctypes.sizeof(value))

    def get(self, name: str, obj: int, attr: int, ctype):
        """An attribute read back (for tests and diagnostics)."""
        value, written = ctype(), _S()
        self.call(name, obj, attr, ctypes.byref(value), ctypes.sizeof(value), ctypes.byref(written))
        return value.value


def library_path() -> str:
    """libcublasLt from the nvidia-cublas-cu12 wheel where installed, else the loader's (the
    system's, or the one CuPy's cuBLAS already loaded)."""
    try:
        import nvidia.cublas

        for folder in nvidia.cublas.__path__:
            found = Path(folder) / "lib" / "libcublasLt.so.12"
            if found.exists():
                return str(found)
    except ImportError:
        pass
    return "libcublasLt.so.12"


class Settings:
    """``enabled`` (default True; ``FLOPCOUNT_CUBLASLT=0`` turns it off) lets a linear and the
    activation after it run as one cuBLASLt matmul where the library is installed."""

    def __init__(self):
        self.enabled = os.environ.get("FLOPCOUNT_CUBLASLT", "1") not in ("", "0")


settings = Settings()
_STATE: dict = {}   # "library": Library or None; ("handle", device): cublasLtHandle_t
_PLANS: dict = {}   # EpiloguePlan -> Described with its algorithm, or None (no algorithm)


def library() -> Library | None:
    """The loaded library, or None where it cannot be loaded (checked once per process)."""
    if "library" not in _STATE:
        try:
            _STATE["library"] = Library(library_path())
        except (OSError, AttributeError):  # not installed, or too old for a call used here
            _STATE["library"] = None
    return _STATE["library"]


def available(xp) -> bool:
    """True when a call on ``xp``'s arrays may go through cuBLASLt (a real CuPy, the library)."""
    return settings.enabled and getattr(xp, "__name__", "") == "cupy" and library() is not None


@dataclass
class Described:
    """A plan's host objects: the matmul descriptor, the A, B and D layouts, the preference,
    and (once a device chose it) the algorithm and its workspace."""

    desc: int
    layouts: dict
    preference: int
    algo: object = None
    workspace: int = 0


def describe(lib: Library, p: EpiloguePlan) -> Described:
    """The descriptor, layouts and preference of plan ``p`` (host-only calls: no device needed)."""
    g = p.gemm
    desc = lib.create("cublasLtMatmulDescCreate", g.compute_type, blas.CUDA_R_32F)  # alpha, beta in float32
    for attr, value in ((DESC_TRANSA, ctypes.c_int32(g.transa)), (DESC_TRANSB, ctypes.c_int32(g.transb)),
                        (DESC_EPILOGUE, ctypes.c_uint32(p.epilogue)),
                        (DESC_BIAS_DATA_TYPE, ctypes.c_int32(g.data_type))):
        lib.set("cublasLtMatmulDescSetAttribute", desc, attr, value)
    layouts = {role: lib.create("cublasLtMatrixLayoutCreate", g.data_type, rows, cols, ld)
               for role, (rows, cols, ld) in p.layouts().items()}
    preference = lib.create("cublasLtMatmulPreferenceCreate")
    prefs = [(PREF_MAX_WORKSPACE_BYTES, ctypes.c_uint64(WORKSPACE_BYTES))]
    prefs += [(PREF_MIN_ALIGNMENT[role], ctypes.c_uint32(align))  # C is D
              for role, align in zip("ABCD", p.alignment[:2] + p.alignment[2:3] * 2)]
    for attr, value in prefs:
        lib.set("cublasLtMatmulPreferenceSetAttribute", preference, attr, value)
    return Described(desc, layouts, preference)


def destroy(lib: Library, d: Described) -> None:
    """Release a plan's host objects."""
    lib.call("cublasLtMatmulDescDestroy", d.desc)
    for layout in d.layouts.values():
        lib.call("cublasLtMatrixLayoutDestroy", layout)
    lib.call("cublasLtMatmulPreferenceDestroy", d.preference)


def _handle(lib: Library, xp) -> int:
    device = xp.cuda.runtime.getDevice()
    handle = _STATE.get(("handle", device))
    if handle is None:
        handle = _STATE[("handle", device)] = lib.create("cublasLtCreate")
    return handle


def _planned(lib: Library, xp, p: EpiloguePlan) -> Described | None:
    """Plan ``p`` described with the heuristic's first algorithm, or None when it has none."""
    if p in _PLANS:
        return _PLANS[p]
    d = describe(lib, p)
    if p.epilogue & EPILOGUE_BIAS:  # the heuristic reads the bias pointer's alignment, never the bias:
        # an address of the plan's alignment stands in for the ones each call sets
        lib.set("cublasLtMatmulDescSetAttribute", d.desc, DESC_BIAS_POINTER, _V(p.alignment[3]))
    result, count = HeuristicResult(), _I()
    status = lib.cdll.cublasLtMatmulAlgoGetHeuristic(_handle(lib, xp), d.desc, d.layouts["A"], d.layouts["B"],
                                                     d.layouts["D"], d.layouts["D"], d.preference, 1,
                                                     ctypes.byref(result), ctypes.byref(count))
    if status != STATUS_NOT_SUPPORTED:
        lib.check("cublasLtMatmulAlgoGetHeuristic", status)
    if status == 0 and count.value > 0 and result.state == 0:
        d.algo, d.workspace = result.algo, int(result.workspace_size)
    else:
        d = None
    _PLANS[p] = d
    return d


def linear_epilogue(xp, x, weight, bias, activation: str | None):
    """``activation(x @ weight.T + bias)`` for x (..., in), weight (out, in), bias (out,) or None,
    as one cuBLASLt matmul ("relu", "gelu_tanh", or None for the bias alone); None where it does
    not apply (a dtype other than float16/bfloat16/float32, an empty or over-large operand, no
    library, no algorithm), for the caller to run its two ops. Handed numpy arrays, the plan runs
    through ``reference``.

    >>> x, w = np.array([[1.0, -2.0]], np.float32), np.array([[1.0, 1.0], [1.0, -1.0]], np.float32)
    >>> linear_epilogue(np, x, w, np.array([0.5, 0.0], np.float32), "relu")
    array([[0., 3.]], dtype=float32)
    """
    name = _source.dtype_name(x.dtype)
    if (name not in DATA_TYPES or x.ndim < 1 or weight.ndim != 2 or weight.dtype != x.dtype
            or (bias is not None and bias.dtype != x.dtype) or activation not in ACTIVATIONS):
        return None
    rows, (n, k) = prod(x.shape[:-1]), weight.shape
    if min(rows, n, k) == 0 or xp is not np and not available(xp):
        return None
    x2, x_op = blas._as_operand(xp, x.reshape(rows, k), ())
    w, w_op = blas._as_operand(xp, weight.T, ())
    if bias is not None:
        bias = xp.ascontiguousarray(bias)  # the epilogue reads n elements one after the other
    out = xp.empty((rows, n), dtype=x.dtype)
    pointers = (0, 0, 0, 0) if xp is np else \
        tuple(0 if a is None else blas.device_pointer(a) for a in (w, x2, out, bias))
    p = plan(x_op, w_op, rows, k, n, name, activation, bias is not None, pointers, blas.settings.allow_tf32)
    if max(rows, n, k, p.gemm.lda, p.gemm.ldb) > blas.INT_MAX:
        return None
    if xp is np:
        reference(p, blas.footprint(w), blas.footprint(x2), bias, out.reshape(-1))
    elif not _matmul(xp, p, w, x2, bias, out):
        return None
    return out.reshape(x.shape[:-1] + (n,))


def _matmul(xp, p: EpiloguePlan, a, b, bias, out) -> bool:
    """One ``cublasLtMatmul`` (cuBLAS's A is the weight, its B is x); False when no algorithm."""
    lib = library()
    d = _planned(lib, xp, p)
    if d is None:
        return False
    if bias is not None:
        lib.set("cublasLtMatmulDescSetAttribute", d.desc, DESC_BIAS_POINTER, _V(blas.device_pointer(bias)))
    alpha, beta = ctypes.c_float(1.0), ctypes.c_float(0.0)
    workspace = xp.empty(max(d.workspace, 1), dtype=xp.uint8)
    pd = blas.device_pointer(out)
    lib.call("cublasLtMatmul", _handle(lib, xp), d.desc, ctypes.byref(alpha), blas.device_pointer(a), d.layouts["A"],
             blas.device_pointer(b), d.layouts["B"], ctypes.byref(beta), pd, d.layouts["D"], pd, d.layouts["D"],
             ctypes.byref(d.algo), workspace.data.ptr, d.workspace, xp.cuda.get_current_stream().ptr)
    paths.ran(paths.CUBLASLT)
    return True

