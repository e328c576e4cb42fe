"""cuDNN through NVIDIA's Python frontend (``nvidia-cudnn-frontend``, ``import cudnn``), its graph
API: a graph of one operation (a convolution pass, attention forward or backward) is described
by tensors with dims and strides, validated, lowered, and its engine chosen by cuDNN's
heuristics once; the built graph is kept per geometry (``plan``), so the choice is made once
per shape, dtype and attributes, and each call only binds device pointers and runs.

CuPy 14 has no cuDNN bindings, so this is the one way in. The library itself
(``nvidia-cudnn-cu12``) is optional: ``available()`` is False without it (or without the
frontend, or with ``FLOPCOUNT_CUDNN=0``), and the callers run their own kernels then. What
decides a graph is pure data (the geometry dataclasses of ``cudnn_conv`` and ``cudnn_sdpa``,
which are the cache keys), so it is tested without a GPU; the frontend builds a graph's tensors
and operations without a device too (only ``validate`` and later need the driver), which the
tests use where the package is installed.
"""

from __future__ import annotations

import os
from typing import Callable

from . import _source, paths

# numpy dtype name -> the frontend's ``cudnn.data_type`` member; float16 and bfloat16 compute in
# float32 as cuBLAS does here, float64 in float64
DATA_TYPES = {"float16": "HALF", "bfloat16": "BFLOAT16", "float32": "FLOAT", "float64": "DOUBLE"}


def compute_type(dtype) -> str:
    """The ``cudnn.data_type`` member a graph over ``dtype`` accumulates in.

    >>> compute_type("bfloat16"), compute_type("float64")
    ('FLOAT', 'DOUBLE')
    """
    return "DOUBLE" if _source.dtype_name(dtype) == "float64" else "FLOAT"


def packed_strides(dims) -> list:
    """Element strides of a C-contiguous tensor of ``dims`` (how our arrays lie in memory).

    >>> packed_strides([2, 3, 4, 5])
    [60, 20, 5, 1]
    """
    out, acc = [], 1
    for n in reversed(list(dims)):
        out.append(acc)
        acc *= max(int(n), 1)
    return out[::-1]


class Settings:
    """``enabled`` (default True; ``FLOPCOUNT_CUDNN=0`` turns it off) lets the CUDA kernels use
    cuDNN where it is installed; off, they run their own kernels (to compare the two paths)."""

    def __init__(self):
        self.enabled = os.environ.get("FLOPCOUNT_CUDNN", "1") not in ("", "0")


settings = Settings()
_STATE: dict = {}   # "module": the imported frontend, or None when it or libcudnn is missing
_PLANS: dict = {}   # geometry -> built graph (or None: cuDNN declined it)


def module():
    """The frontend module with libcudnn loaded, or None (checked once per process)."""
    if "module" not in _STATE:
        try:
            import cudnn

            cudnn.backend_version()  # loads libcudnn: fails without nvidia-cudnn-cu12
            _STATE["module"] = cudnn
        except Exception:  # ImportError, or the library or a driver missing
            _STATE["module"] = None
    return _STATE["module"]


def available(xp) -> bool:
    """True when a call on ``xp``'s arrays may go through cuDNN: a real GPU array module (not
    numpy, not a stand-in), cuDNN installed and not turned off."""
    return settings.enabled and getattr(xp, "__name__", "") == "cupy" and module() is not None


def data_type(cudnn, dtype):
    """The frontend's data type of ``dtype``."""
    return getattr(cudnn.data_type, DATA_TYPES[_source.dtype_name(dtype)])


def new_graph(cudnn, dtype):
    """An empty graph whose tensors are ``dtype`` and whose arithmetic is ``compute_type``."""
    io = data_type(cudnn, dtype)
    acc = getattr(cudnn.data_type, compute_type(dtype))
    return cudnn.pygraph(io_data_type=io, intermediate_data_type=acc, compute_data_type=acc)


def _handle(cudnn, xp):
    """One cuDNN handle per GPU, bound to CuPy's current stream before each call."""
    device = xp.cuda.runtime.getDevice()
    handle = _STATE.get(("handle", device))
    if handle is None:
        handle = _STATE[("handle", device)] = cudnn.create_handle()
    cudnn.set_stream(handle, xp.cuda.get_current_stream().ptr)
    return handle


def python_engine_names(graph, is_python_engine: Callable) -> list:
    """Names of the ranked plans run by the frontend's Python engines (CuTe DSL kernels that
    may want framework tensors, not the raw pointers passed here), to deselect: the library's
    own engines take device pointers. A plan that delegates to the library's heuristics
    (``get_engine_and_knobs_at_index`` raises) is the library's."""
    names = []
    for i in range(graph.get_execution_plan_count()):
        try:
            engine_id, _ = graph.get_engine_and_knobs_at_index(i)
        except NotImplementedError:
            continue
        if is_python_engine(engine_id):
            names.append(graph.get_plan_name_at_index(i).split("[")[0])
    return sorted(set(names))


def _library_engines_only(cudnn, graph) -> None:
    try:
        from cudnn.engines.engine_ids import is_python_engine
    except ImportError:  # a frontend without Python engines
        return
    names = python_engine_names(graph, is_python_engine)
    if names:
        graph.deselect_engines(names)


def plan(key, build: Callable, restrict: Callable | None = None):
    """The built graph of ``key`` (a hashable geometry), made by ``build(cudnn)`` -> (graph,
    tensors) once: validated, lowered, execution plans from heuristics A with the fallback list,
    the library's engines only, ``restrict(cudnn, graph)`` (to deselect more) and the first
    supported plan built. None when cuDNN declines the graph; the answer is kept either way."""
    if key in _PLANS:
        return _PLANS[key]
    cudnn = module()
    try:
        graph, tensors = build(cudnn)
        graph.validate()
        graph.build_operation_graph()
        graph.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
        _library_engines_only(cudnn, graph)
        if restrict is not None:
            restrict(cudnn, graph)
        graph.check_support()
        graph.build_plans()
        built = (graph, tensors, int(graph.get_workspace_size()))
    except Exception:  # not supported on this GPU / version: the caller's own kernels run
        built = None
    _PLANS[key] = built
    return built


def execute(xp, built, arrays: dict) -> None:
    """Run a built graph on ``arrays`` ({tensor role: CuPy array}) on the current stream."""
    cudnn = module()
    graph, tensors, workspace_bytes = built
    workspace = xp.empty(max(workspace_bytes, 1), dtype=xp.uint8)
    pack = {tensors[role]: a.data.ptr for role, a in arrays.items()}
    graph.execute(pack, workspace.data.ptr, handle=_handle(cudnn, xp))
    paths.ran(paths.CUDNN)


def cached() -> list:
    """Keys of the graphs planned so far (None values: declined)."""
    return list(_PLANS)


def clear() -> None:
    _PLANS.clear()
