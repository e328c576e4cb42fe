"""Every raw and generated CUDA source compiles with NVRTC, for each dtype. Needs CuPy's NVRTC
and the CUDA headers, not a GPU; skipped where they are missing (CI has no CuPy)."""

import importlib.util
import os

import pytest

from flopcount.runtime.cuda.kernels import attention, conv, elementwise, pooling, rowwise

DTYPES = ("float16", "float32", "float64")
ARCH = "compute_70"  # the oldest GPU with float16 atomics the kernels target


def _include_dirs() -> list:
    cupy = pytest.importorskip("cupy")
    dirs = [os.path.join(os.path.dirname(cupy.__file__), "_core", "include")]
    cuda_path = getattr(cupy.cuda, "get_cuda_path", lambda: None)()
    candidates = [os.path.join(cuda_path, "include")] if cuda_path else []
    spec = importlib.util.find_spec("nvidia.cuda_runtime") if importlib.util.find_spec("nvidia") else None
    if spec and spec.submodule_search_locations:
        candidates += [os.path.join(p, "include") for p in spec.submodule_search_locations]
    headers = [d for d in candidates if os.path.exists(os.path.join(d, "cuda_fp16.h"))]
    if not headers:
        pytest.skip("no CUDA headers (cuda_fp16.h) to compile against")
    return dirs + headers[:1]


def _compile(src: str) -> None:
    compiler = pytest.importorskip("cupy.cuda.compiler")
    try:
        from cupy_backends.cuda.libs import nvrtc

        nvrtc.getVersion()
    except Exception as exc:  # NVRTC library not installed
        pytest.skip(f"NVRTC is not available ({exc})")
    options = (f"-arch={ARCH}", "--std=c++17") + tuple(f"-I{d}" for d in _include_dirs())
    compiler._NVRTCProgram(src, "kernel.cu", method="ptx").compile(options)


def _raw_sources():
    for dtype in DTYPES:
        for name in ("softmax_rows", "norm_rows"):
            yield f"{name}-{dtype}", rowwise.source(name, dtype)
        for name in ("im2col", "col2im", "depthwise"):
            yield f"{name}-{dtype}", conv.source(name, dtype)
        for name in ("max_pool", "max_pool_backward"):
            yield f"{name}-{dtype}", pooling.source(name, dtype)
        for kind, mask_dtype in ((attention.MASK_NONE, None), (attention.MASK_BOOL, None),
                                 (attention.MASK_ADD, "float32"), (attention.MASK_ADD, "float64")):
            yield f"attention-{dtype}-{kind}-{mask_dtype}", attention.source(dtype, kind, mask_dtype)


RAW = dict(_raw_sources())


@pytest.mark.parametrize("name", sorted(RAW))
def test_raw_kernel_compiles(name):
    _compile(RAW[name])


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_expression_compiles_in_one_chain(dtype):
    # one kernel body holding every expression: what ElementwiseKernel compiles, around the
    # preamble, with T the dtype's CuPy type
    steps = []
    attrs = {"clamp": {"min": -1.0, "max": 1.0}, "hardtanh": {"min_val": 0.0, "max_val": 6.0},
             "leaky_relu": {"negative_slope": 0.1}, "gelu": {"approximate": "tanh"},
             "softplus": {"beta": 2.0, "threshold": float("inf")},
             "elu": {"alpha": 1.0, "scale": 1.05, "input_scale": 0.5}}
    for name in sorted(elementwise.EXPRESSIONS):
        prev = -len(steps) if steps else 0
        binary = name in ("add", "sub", "mul", "div", "pow", "maximum", "minimum")
        steps.append((name, (prev, 1) if binary else (prev,), attrs.get(name, {})))
    body = elementwise.kernel_body(steps, 2, dtype)
    ctype = {"float16": "float16", "float32": "float", "float64": "double"}[dtype]
    src = ("#include <cupy/float16.cuh>\n" + elementwise.preamble() + f"typedef {ctype} T;\n"
           f"__device__ void op(T x0, T x1, T& out) {{\n{body}\n}}\n")
    _compile(src)
