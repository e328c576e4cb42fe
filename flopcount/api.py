"""The two entry points: ``profile`` (a full Report) and ``get_model_complexity_info``
(ptflops/flowflops-compatible ``(macs, params)``). Both choose the eager or the graph view.

    import flopcount
    report = flopcount.profile("resnet50")                       # graph view, flopcount convention
    macs, params = flopcount.get_model_complexity_info(model, (1, 3, 224, 224))   # "4.12 GMac"
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys
import threading
import weakref
from typing import Callable, Iterator

import numpy as np

from . import conventions, loading
from .engines import ENGINES, jax_engine, onnxruntime_engine, torch_engine
from .hardware import get as hardware_profile
from .runtime.quantization import weight_format as rt_weight_format
from .eager_hooks import profile_eager
from .graph_parser import profile_graph
from .inputs import bind_inputs, given_shapes, inputs_for, resolve_inputs
from .options import Option, option_error
from .report import Report
from .report.units import macs_to_string, params_to_string
from .runtime import errors
from .runtime.graph import Graph, LazyGraph
from .runtime.nn.modules.module import Module
from .runtime import cpu_kernels
from .runtime import threads as rt_threads
from .runtime.routing import current_policy, note as routing_note
from .runtime import torch as rt_torch

MODES = ("eager", "graph")


# --- models and inputs ---------------------------------------------------------------------------

def _parameter_device(model):
    if isinstance(model, Graph):
        return model.device
    for p in model.parameters():
        return p.device
    for b in model.buffers():
        return b.device
    return None


_gc_lock = threading.Lock()
_gc_pausers = 0            # views running now, in any thread
_gc_was_enabled = False    # the collector's state before the first of them paused it


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Python's cyclic collector off while a view runs. Counting keeps every op's record (specs,
    events, rows) until the report is built, and the collector, triggered by their number,
    rescans the growing heap again and again: a 96-layer model took 1.3x longer per layer than a
    48-layer one, and the collector half of the time. The runs make no cyclic garbage (autograd
    releases its nodes after each backward), and the collector resumes when the last view running
    in any thread is done."""
    global _gc_pausers, _gc_was_enabled
    with _gc_lock:
        if _gc_pausers == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_pausers += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_pausers -= 1
            if _gc_pausers == 0 and _gc_was_enabled:
                gc.enable()


_model_locks: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_model_locks_guard = threading.Lock()


def _model_lock(model) -> threading.RLock:
    """One lock per model object. Profiling a model notes things on its tensors and sets and
    restores its flags, buffers and gradients, so two profiles of the same model from two
    threads take turns; profiles of different models run at the same time."""
    with _model_locks_guard:
        lock = _model_locks.get(model)
        if lock is None:
            lock = _model_locks[model] = threading.RLock()
        return lock


def _run_view(mode: str, model, args: tuple, kwargs: dict, **options) -> Report:
    """The eager view (a Module's hooks) or the graph view. NaN and Inf in the inputs (or made
    by the model) are the data's business, as in PyTorch: counting reads shapes only, and the
    runs compute on them without numpy's floating-point warnings."""
    with _model_lock(model), np.errstate(all="ignore"), _gc_paused():
        if mode == "eager" and isinstance(model, Module):
            return profile_eager(model, args, kwargs, **options)
        return profile_graph(model, args, kwargs, **options)


def _eager_form(model):
    """``rt.Graph(module)`` is its module, compiled on each call for the inputs given: profiled
    as that module (the graph view traces it for the same inputs)."""
    return model.module if isinstance(model, LazyGraph) else model


def _by_declared_name(path: str, args: tuple) -> dict:
    """Positional tensors for an ONNX file, named as the file declares its inputs."""
    declared = [i.name for i in loading.onnx_module(path).inputs(path)] if args else []
    if len(args) > len(declared):
        raise errors.ShapeError(f"{path} takes {len(declared)} input(s) {declared}, got {len(args)} tensors")
    return dict(zip(declared, args))


def _shapes_of(args: tuple, kwargs: dict) -> list:
    """[(name or None, shape)] of the tensors given: they bind an ONNX file's symbolic dims."""
    from .runtime.tensor import Tensor

    return ([(None, tuple(a.shape)) for a in args if isinstance(a, Tensor)]
            + [(k, tuple(v.shape)) for k, v in kwargs.items() if isinstance(v, Tensor)])


# the progress step while a CPU kernel compiles (the first timed run after installing)
COMPILING = "compiling CPU kernels, once after installing (cached for later runs)"


def _on_cpu(device) -> bool:
    return str(device).split(":")[0] == "cpu"


def _check_device(device) -> None:
    """Fail early, in one line, when ``device`` cannot be used (CUDA without CuPy or a GPU)."""
    from .runtime.device import backend, device as parse_device

    if device is not None and str(device) not in ("cpu", "meta"):
        backend(parse_device(device))


def _input_device(target, device: str, zoo_device: str):
    """Where the inputs made for ``target`` go: where a file or object model lives."""
    if target.device is not None:
        return target.device
    if target.kind == loading.OBJECT:
        return _parameter_device(target.model) or device
    return zoo_device if target.kind == loading.ZOO else device


def _routes_experts(net: Module) -> bool:
    """Whether ``net`` has mixture-of-experts blocks that ran on meta (their routing a policy's)."""
    return any(hasattr(m, "top_k") and hasattr(getattr(m, "experts", None), "num_experts")
               and any(p.data is None for p in m.experts.parameters()) for m in net.modules())


def _does_not_fit(target, specs: list, exc: errors.ShapeError) -> errors.ShapeError:
    """A model's ShapeError on inputs built from the shapes given: say which inputs, and the
    model's default ones."""
    default = ", ".join(s.describe() for s in target.expected) if target.expected else None
    return errors.ShapeError(
        f"input {', '.join(s.describe() for s in specs)} does not fit {target.name}"
        + (f" (its default input is {default})" if default else "") + f": {exc}")


def _is_shape(value) -> bool:
    """A tuple or list of non-negative ints (not bools): a shape given where an input goes."""
    return (isinstance(value, (tuple, list)) and len(value) > 0
            and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in value))


def _floats_in(dtype, values) -> tuple:
    """The floating tensors among ``values`` cast to ``dtype``; anything else as it is."""
    from .runtime.tensor import Tensor

    return tuple(v.to(dtype) if isinstance(v, Tensor) and v.dtype.is_floating_point else v for v in values)


# --- profile -------------------------------------------------------------------------------------

def profile(model, *inputs, input_shape=None, batch: int | None = None, mode: str = "graph",
            device=None, latency: bool = False, repeat: int = 5, warmup: int = 1, backward: bool = False,
            measure_memory: bool = False, convention: str = "flopcount", strict: bool = False,
            factory_args: dict | None = None, hardware=None, dtype=None, weights=None, engine: str = "flopcount",
            input_values: dict | None = None, threads: int | None = None, framework: str | None = None,
            progress: Callable[[str], None] | None = None, **named_inputs) -> Report:
    """What ``model`` costs: a :class:`~flopcount.report.Report` (rows, totals, memory, latency).

    ``model`` is a Module (``rt.Graph(module)`` counts as its module), a Graph, a JAX model
    (a plain or jitted function, a Flax ``nnx.Module``, or ``(linen_module, variables)``, traced
    on ``inputs``: arrays or ``jax.ShapeDtypeStruct``; ``framework="jax"`` when a plain function
    is not recognised, and for a ``file.py:factory`` returning ``(model, example_args)``; see
    :mod:`flopcount.jax_loading`), a zoo name (``"resnet50"``) or a model file: ``.onnx``, a
    native file, or ``file.py:factory`` (which RUNS that Python file and calls
    ``factory(**factory_args)``; model files are only read). A bare name that is both a zoo
    model and an existing path means the path (``"zoo:name"`` is the zoo model, and a note says
    so); see :mod:`flopcount.loading`.
    ``inputs`` and ``named_inputs`` are the model's inputs: names are bound to ``forward``'s
    parameters (or a graph's input names), checked before anything runs. Without them
    ``input_shape`` (a shape, a list of shapes, or ``{input name: shape}``) or the model's
    default input is used, with ``batch`` as every input's first dimension; an ONNX file's symbolic dims
    are bound from ``input_shape`` and ``batch`` (or from the inputs given). An ONNX file's inputs
    that carry shapes (a Reshape target, TopK's k) take their values from ``input_values``
    ``{name: values}`` or from the tensors given; the graph is specialized to them, as to shapes.
    A Module is profiled where its parameters live; ``device`` places models built here and the
    inputs made here (``"meta"`` counts without allocating; left out, a zoo model that is only
    counted is built on meta and anything that runs on the CPU). ``mode`` is ``"graph"`` (trace
    and parse every op) or ``"eager"`` (module hooks on a real run). ``latency=True`` times ``warmup``
    plus ``repeat`` synchronized runs; ``backward=True`` adds a training step's backward pass;
    ``measure_memory=True`` measures the activation peak beside the prediction. ``strict=True``
    raises UnsupportedOpError when anything ran that the convention has no rule for.
    ``hardware`` (a name from ``flopcount.hardware.names()``, such
    as ``"h100-sxm"``, or a Profile) prices every op on that device's roofline: each op's and
    row's ``roofline_ms`` and ``bound``, and ``totals["roofline_ms"]`` (beside the measured
    latency as ``roofline_fraction`` when timed). ``dtype`` (``"bfloat16"``, ``"bf16"``,
    ``"float16"``...) runs the model's weights and activations in that floating dtype: its
    floating parameters, buffers and inputs (a Module you pass is converted on a copy); integer
    inputs such as token ids stay as they are. An integer ``dtype`` (``"int64"``) is instead the
    dtype of every input built from shapes, and ``{input name: dtype}`` that of one input (for a
    model that cannot tell, such as a factory taking token ids). ``weights`` stores every Linear weight (but
    ``lm_head`` and tied ones) in a weight format: ``"int8"`` (a float16 scale per output
    channel), ``"int4"`` (a float16 scale per 128 weights: 4.125 bits each), ``"fp8"`` (e4m3, one
    float32 scale), ``"int4:g64"``...; parameter memory and the bytes each layer reads follow
    (see :mod:`flopcount.runtime.quantization`).
    ``threads`` is how many threads a timed run on the CPU uses, in every engine (BLAS,
    flopcount's kernels, PyTorch's intra-op threads, onnxruntime's); None: the cores free when
    timing begins (usable cores less those other processes keep busy; see
    :mod:`flopcount.runtime.threads`), named in ``report.threads``.
    ``progress`` is called with the name of each step as it starts (``"loading resnet50"``,
    ``"counting"``). Bad input of any kind raises a :class:`~flopcount.FlopcountError`
    subclass, and the model's parameters, buffers, flags and hooks are left as they were.
    ``engine="torch"`` measures a PyTorch model's latency with PyTorch itself, module by module
    (warm-up, ``repeat`` runs, median; see :mod:`flopcount.engines.torch_engine`), beside
    flopcount's counts; the default ``"flopcount"`` times flopcount's own run when ``latency``.
    ``engine="onnxruntime"`` times an ONNX file in onnxruntime as it deploys it (its graph
    optimizations, the CPU or CUDA provider by ``device``) with its profiler, and joins each of its nodes' time with
    flopcount's counts of the file's nodes it computes: ``report.engine_nodes`` (achieved FLOP/s
    and bytes/s per node; ``onnxruntime_engine.by_op_type`` sums them per op type), the rows' ``latency_ms``, and notes
    on what could not be joined (see :mod:`flopcount.engines.onnxruntime_engine`).
    ``engine="jax"`` times a JAX model's jitted call with JAX (the whole call: XLA fuses its ops;
    see :mod:`flopcount.engines.jax_engine`).

    >>> import flopcount, flopcount.runtime as rt
    >>> report = flopcount.profile(rt.nn.Linear(3, 2), rt.ones(4, 3))
    >>> report.macs, report.flops, report.params
    (24, 56, 8)
    """
    model = _eager_form(model)
    if mode not in MODES:
        raise ValueError(f"profile: mode must be one of {MODES}, got {mode!r}")
    counting = conventions.get(convention)
    _check_device(device)
    say = progress or (lambda step: None)
    profile_of = hardware_profile(hardware) if hardware is not None else None  # a bad name fails first
    dtype, input_dtypes = loading.split_dtype(dtype)
    weight_format = rt_weight_format(weights) if weights is not None else None  # a bad spec fails first
    if engine not in ENGINES:
        raise errors.FlopcountError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    if engine in (torch_engine.NAME, onnxruntime_engine.NAME) and (dtype is not None or weight_format is not None):
        # the engine would time the model as it is, beside counts of a converted copy
        timed, yours = ("PyTorch model", "torch module") if engine == torch_engine.NAME else ("ONNX file", "file")
        raise errors.FlopcountError(f"engine {engine!r} times the {timed} as it is; dtype and weights "
                                    f"convert flopcount's copy only (got dtype={getattr(dtype, 'name', None)!r}, "
                                    f"weights={weights!r}): convert the {yours} yourself, or use engine 'flopcount'")
    if inputs and not named_inputs and input_shape is None and all(_is_shape(x) for x in inputs):
        # profile(net, (1, 3, 224, 224)): a shape where a tensor goes, as peers take it
        input_shape, inputs = (tuple(inputs[0]) if len(inputs) == 1 else [tuple(x) for x in inputs]), ()
    given = given_shapes(input_shape)
    if not given and not isinstance(model, (Module, Graph)):
        given = _shapes_of(inputs, named_inputs)
    values = dict(input_values or {})
    onnx_file = isinstance(model, (str, os.PathLike)) and loading.kind_of(os.fspath(model)) == loading.ONNX
    if onnx_file and (inputs or named_inputs):
        # the tensors given bind the values of the inputs that carry shapes; by name from here on
        named_inputs = {**_by_declared_name(os.fspath(model), inputs), **named_inputs}
        inputs = ()
        values.update((k, t.numpy()) for k, t in named_inputs.items() if k not in values and t.data is not None)
    # counting needs shapes only: a zoo model that nothing runs is built on the meta device
    only_counted = device is None and not (latency or measure_memory or inputs or named_inputs)
    device = device or "cpu"
    zoo_device = "meta" if only_counted else device
    if isinstance(model, (str, os.PathLike)):
        say(f"loading {os.fspath(model)}")
    target = loading.load(model, device, zoo_device=zoo_device, given=given, batch=batch,
                          factory_args=factory_args, values=values or None, framework=framework)
    if mode == "eager" and (isinstance(target.model, Graph) or target.kind == loading.JAX):
        what = "a JAX model, traced into a graph" if target.kind == loading.JAX else "a graph (a model file)"
        raise option_error(errors.FlopcountError, Option("mode", "eager"), f" runs a model's Python modules; "
                           f"{target.name} is {what}, profile it with ", Option("mode", "graph"))
    if target.kind in (loading.TORCH, loading.JAX) and (inputs or named_inputs):
        # captured for the inputs given, the graph then takes inputs made from their shapes
        target = loading.specialize(target, examples=(inputs, named_inputs), train=backward)
        inputs, named_inputs = (), {}
    if dtype is not None:
        target = loading.in_dtype(target, dtype)
        inputs, named_inputs = _floats_in(dtype, inputs), dict(zip(named_inputs, _floats_in(dtype, named_inputs.values())))
    if weight_format is not None:
        target = loading.with_weights(target, weight_format)
    net = target.model
    specs = None
    if onnx_file and named_inputs:  # inputs whose values the graph took are no longer its inputs
        kept = {v.name for v in net.inputs}
        named_inputs = {k: v for k, v in named_inputs.items() if k in kept}
    if inputs or named_inputs:
        if input_dtypes:
            named = ", ".join(f"{name}={value}" if name else value for name, value in input_dtypes)
            raise errors.FlopcountError(f"dtype {named}: an integer or per-input dtype is for inputs built "
                                        f"from shapes; the tensors given keep theirs (cast them)")
        args, kwargs = bind_inputs(net, inputs, named_inputs)
    else:
        specs = resolve_inputs(target.expected, given, batch, dtypes=input_dtypes, model=target.name)
        target = loading.specialize(target, specs, train=backward)  # a PyTorch module: captured for them
        net = target.model
        loading.check_fixed(target, specs)
        args, kwargs = inputs_for(net, specs, _input_device(target, device, zoo_device),
                                  keyword=target.kind != loading.ZOO)
    check_engine(engine, target)
    timed = latency or engine != "flopcount"
    # spinning thread pools on busy cores time the machine's load, not the model: on the CPU a
    # timed run takes its threads from the cores free now unless told (runtime/threads.py)
    if engine == jax_engine.NAME and threads is not None:
        raise option_error(errors.FlopcountError, Option("threads", threads), " applies to engines that flopcount "
                           "can limit; engine 'jax' runs on XLA's own thread pool")
    # (XLA's thread pool is its own: a JAX run is not limited, nor said to be)
    choice = rt_threads.choose(threads) if timed and _on_cpu(device) and engine != jax_engine.NAME else None
    say((f"timing {warmup} warm-up + {repeat} runs" + (f" on {choice.threads} thread(s)" if choice else ""))
        if timed else "counting")
    try:
        with contextlib.ExitStack() as scope:
            scope.enter_context(loading.file_errors(target))
            if choice is not None:
                scope.enter_context(rt_threads.limited(choice.threads))
            if timed:
                scope.enter_context(cpu_kernels.on_compile(lambda kernel: say(f"{COMPILING}: {kernel}")))
            report = _run_view(mode, net, tuple(args), kwargs, convention=counting,
                               latency=latency and engine == "flopcount", backward=backward, warmup=warmup,
                               repeat=repeat, measure_memory=measure_memory, name=target.label)
            notes = list(target.notes)
            report = run_engine(report, engine, target, warmup, repeat, inputs=(args, kwargs, values), device=device,
                       threads=choice.threads if choice else threads)
            report.threads = choice
    except errors.ShapeError as exc:
        if specs is None or (not given and batch is None) or isinstance(exc, errors.MemoryLimitError):
            raise
        raise _does_not_fit(target, specs, exc) from exc
    report.notes = notes + report.notes
    if isinstance(net, Module) and _routes_experts(net):
        report.notes.append(routing_note(current_policy()))
    if strict and report.unsupported:
        raise errors.UnsupportedOpError(
            f"no rule in the {report.convention} convention for: " + "; ".join(str(u) for u in report.unsupported))
    if profile_of is not None:
        report = report.with_hardware(profile_of)
    return report


# --- engines: who runs the model for its latency ---------------------------------------------------

def check_engine(engine: str, target) -> None:
    """Refuse, before anything runs, an engine that cannot run this model."""
    if engine == torch_engine.NAME and target.torch_call is None:
        raise errors.FlopcountError(f"engine 'torch' times a PyTorch model; {target.name} is not one "
                                    f"(a {target.kind} model runs on flopcount's runtime: engine 'flopcount')")
    if engine == jax_engine.NAME and target.jax_call is None:
        raise errors.FlopcountError(f"engine 'jax' times a JAX model; {target.name} is not one "
                                    f"(a {target.kind} model runs on flopcount's runtime: engine 'flopcount')")
    if engine == onnxruntime_engine.NAME and target.kind != loading.ONNX:
        raise errors.FlopcountError(f"engine 'onnxruntime' times an ONNX file; {target.name} is not one "
                                    f"(a {target.kind} model runs on flopcount's runtime: engine 'flopcount')")


def run_engine(report: Report, engine: str, target, warmup: int, repeat: int, inputs: tuple = ((), {}, {}),
               device="cpu", threads: int | None = None) -> Report:
    """``engine="torch"``: the PyTorch model timed by PyTorch; ``"onnxruntime"``: the ONNX file
    timed by onnxruntime on ``inputs`` (the args and kwargs flopcount ran the graph on, and the
    values bound to inputs that carry shapes): a copy of ``report`` with their times on its rows
    (``report`` itself, as it was, for engine "flopcount")."""
    if engine == "flopcount":
        return report
    timed = report.copy()
    if engine == torch_engine.NAME:
        module, args, kwargs = target.torch_call
        times = torch_engine.time_module(module, args, kwargs, warmup=warmup, repeat=repeat)
        torch_engine.join(timed, times, torch_engine.time_ops(module, args, kwargs, repeat=repeat))
    elif engine == jax_engine.NAME:
        model, args = target.jax_call
        jax_engine.join(timed, jax_engine.time_call(model, args, warmup=warmup, repeat=repeat))
    elif engine == onnxruntime_engine.NAME:
        from .runtime.host_memory import check_fits
        from .runtime.onnx.importer import read_model

        # refused before onnxruntime allocates it, with the figure flopcount has: the liveness
        # peak of the same graph (onnxruntime plans and fuses on its own, so its peak may differ)
        check_fits(timed.memory.predicted_peak or 0, f"running {target.label} in onnxruntime (activations at "
                   f"their predicted peak)", "count without latency (shapes only), or use smaller inputs",
                   device=device)
        feeds = _feeds(target.model, *inputs)
        times = onnxruntime_engine.time_file(target.path, feeds, device=str(device), threads=threads,
                                             warmup=warmup, repeat=repeat)
        onnxruntime_engine.join(timed, times, read_model(target.path))
    return timed


def _feeds(net, args: tuple, kwargs: dict, values: dict | None) -> dict:
    """{graph input name: numpy array} of a run's inputs, and the values bound to inputs that
    carry shapes; an input without data (meta) gets seeded values of its shape and dtype."""
    import numpy as np

    rng = np.random.default_rng(0)
    given = dict(zip([v.name for v in getattr(net, "inputs", [])], args))
    given.update(kwargs)
    feeds = {}
    for name, t in given.items():
        if getattr(t, "data", None) is not None:
            feeds[name] = t.numpy()
        elif t.dtype.is_floating_point:
            feeds[name] = rng.standard_normal(t.shape).astype(t.dtype.np)
        else:
            feeds[name] = np.zeros(t.shape, t.dtype.np)
    feeds.update((k, np.asarray(v)) for k, v in (values or {}).items())
    return feeds


# --- ptflops / flowflops compatibility -----------------------------------------------------------

def _custom_rule(hook: Callable) -> Callable:
    """A ptflops hook ``hook(module, input, output)`` (adds to ``module.__flops__`` or returns
    a number) as a module rule. It sees specs, which have ``shape``, ``dtype`` and ``numel()``."""

    def rule(module, inputs, output):
        had = "__flops__" in module.__dict__
        saved = module.__dict__.get("__flops__")
        object.__setattr__(module, "__flops__", 0)
        try:
            returned = hook(module, inputs, output)
            counted = returned if isinstance(returned, (int, float)) else module.__dict__["__flops__"]
        finally:
            if had:
                object.__setattr__(module, "__flops__", saved)
            else:
                object.__delattr__(module, "__flops__")
        return conventions.base.macs_only(int(counted))

    return rule


def _inputs_from(model, input_res, input_constructor) -> tuple:
    """(args, kwargs) as flowflops builds them: ``input_constructor(input_res)`` (a dict is
    passed as keyword arguments) or one tensor of shape ``input_res`` (batch included)."""
    from .runtime import factories

    if input_constructor is not None:
        value = input_constructor(input_res)
        # ptflops passes a dict as keyword arguments and anything else as the arguments; some
        # of them may be flags, but at least one must be a tensor
        if isinstance(value, dict) and any(_is_input(v) for v in value.values()):
            return (), value
        if isinstance(value, (tuple, list)) and any(_is_input(v) for v in value):
            return tuple(value), {}
        if _is_input(value):
            return (value,), {}
        raise errors.FlopcountError(f"input_constructor returned {type(value).__name__} {_short(value)}; expected "
                                    f"a Tensor, a tuple or list of Tensors, or a dict of them by forward's "
                                    f"argument names")
    dtype, device = "float32", None
    if isinstance(model, Module):
        for p in model.parameters():
            dtype, device = p.dtype, p.device
            break
    elif isinstance(model, Graph):
        device = model.device
    return (factories.ones(*tuple(input_res), dtype=dtype, device=device),), {}


def _is_input(value) -> bool:
    from .runtime.tensor import Tensor

    return isinstance(value, Tensor) or rt_torch.is_tensor(value)


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _torch_graph(module, input_res, input_constructor) -> tuple:
    """(Graph, args, kwargs) for a ``torch.nn.Module``: captured on flowflops' input (a tensor of
    ones of shape ``input_res`` in the parameters' dtype, or ``input_constructor(input_res)``),
    and run on inputs of the same shapes made from the graph's specs."""
    from .inputs import inputs_for

    if input_constructor is not None:
        value = input_constructor(input_res)
        args, kwargs = ((), value) if isinstance(value, dict) else ((value if isinstance(value, tuple) else (value,)), {})
    else:
        import torch

        first = next(module.parameters(), None)
        dtype, device = (first.dtype, first.device) if first is not None else (torch.float32, "cpu")
        args, kwargs = (torch.ones(*tuple(input_res), dtype=dtype, device=device),), {}
    target = loading.specialize(loading.load(module), examples=(args, kwargs))
    graph = target.model
    return (graph,) + tuple(inputs_for(graph, target.expected, target.device or graph.device))


def _torch_graph_either_spelling(module, input_res, input_constructor) -> tuple:
    """(Graph, args, kwargs, batched) for a ``torch.nn.Module``: captured on ``input_res`` as the
    whole shape, or, when that capture fails, on ptflops' spelling ``(1, *input_res)`` (then
    ``batched`` is that shape, else None). A module that fails on both gets the first error."""
    try:
        return _torch_graph(module, input_res, input_constructor) + (None,)
    except (errors.ModelFileError, errors.ShapeError) as exc:
        if input_constructor is not None or not _is_shape(input_res):
            raise
        first = exc
    batched = (1, *input_res)
    try:
        return _torch_graph(module, batched, None) + (batched,)
    except errors.FlopcountError:
        raise first from None


def _graph_spelling(graph: Graph, input_res) -> tuple | None:
    """None when ``graph`` (specialized to its traced shapes) takes ``input_res``; ``(1, *input_res)``
    when it takes that (ptflops' spelling); a ShapeError naming both when it takes neither."""
    if len(graph.inputs) != 1 or not _is_shape(input_res):
        return None
    traced, batched = graph.inputs[0].shape, (1, *input_res)
    if tuple(input_res) == traced:
        return None
    if batched == traced:
        return batched
    raise errors.ShapeError(f"graph {graph.name} was traced on input shape {traced}; input_res {tuple(input_res)} "
                            f"is neither that nor that without the batch (trace again on the shape meant)")


def per_layer_listing(report: Report, model, ost=sys.stdout, flops_units=None, param_units=None,
                      precision: int = 2) -> None:
    """The model's repr, each module annotated as ptflops and flowflops print it:
    ``Conv2d(9.41 k, 0.037% Params, 118.01 MMac, 2.863% MACs, 3, 64, kernel_size=...)``."""
    total_macs = max(report.macs, 1)
    total_params = max(report.root.trainable_params, 1)

    def stat(path: str) -> str:
        row = report.row(path)
        return ", ".join([params_to_string(row.trainable_params, param_units, precision),
                          f"{100 * row.trainable_params / total_params:.3f}% Params",
                          macs_to_string(row.macs, flops_units, precision),
                          f"{100 * row.macs / total_macs:.3f}% MACs"])

    def text(module, path: str) -> str:
        extra = module.extra_repr()
        head = stat(path) + (", " + extra if extra else "")
        lines = []
        for name, child in module._modules.items():
            if child is None:
                continue
            child_path = f"{path}.{name}" if path else name
            body = text(child, child_path) if child_path in report else repr(child)
            lines.append(f"({name}): " + body.replace("\n", "\n  "))
        if not lines:
            return f"{type(module).__name__}({head})"
        return f"{type(module).__name__}(\n  " + "\n  ".join([head] + lines) + "\n)"

    print(text(model, ""), file=ost)


def get_model_complexity_info(model, input_res, print_per_layer_stat: bool = True, as_strings: bool = True,
                              input_constructor=None, ost=sys.stdout, verbose: bool = False,
                              ignore_modules=(), custom_modules_hooks=None, mode: str = "eager",
                              flops_units=None, param_units=None, output_precision: int = 2,
                              convention: str = "ptflops"):
    """``(macs, params)`` of ``model`` as ptflops/flowflops report them.

    ``input_res`` is the whole input shape, batch included (flowflops' meaning), or ptflops'
    spelling without the batch: when the whole shape does not fit the model's shape rules (or a
    ``torch.nn.Module`` fails to run on it), it runs on ``(1, *input_res)`` and says so on ``ost``. The model runs
    once on a tensor of ones of that shape (or on ``input_constructor(input_res)``; a dict is
    passed as keyword arguments). ``macs`` follows ``convention`` (``ptflops`` by default);
    ``params`` counts trainable parameters once. With ``as_strings`` both are strings such as
    ``"4.12 GMac"`` and ``"25.56 M"`` (``flops_units``/``param_units`` force a unit).
    ``ignore_modules`` lists module types counted as zero; ``custom_modules_hooks`` maps a type to
    a ptflops-style hook (both act on module rules: the eager view). ``mode="graph"`` parses
    the traced graph instead of hooking modules, pricing every op with the convention's op rules.
    A ``torch.nn.Module`` is captured (torch.export) and always counted in the graph view, so the
    ops it runs outside modules count too (ResNet's residual adds, which ptflops' hooks miss).

    >>> import flopcount, flopcount.runtime as rt
    >>> flopcount.get_model_complexity_info(rt.nn.Linear(3, 2), (3,), print_per_layer_stat=False)
    ('8 Mac', '8')
    """
    model = _eager_form(model)
    if mode not in MODES:
        raise ValueError(f"get_model_complexity_info: mode must be one of {MODES}, got {mode!r}")
    batched = None   # the shape run instead of input_res, when read as ptflops' spelling
    if rt_torch.is_module(model):
        model, args, kwargs, batched = _torch_graph_either_spelling(model, input_res, input_constructor)
    elif not isinstance(model, (Module, Graph)):
        raise TypeError(f"get_model_complexity_info: model must be a Module (flopcount or torch) or a Graph, "
                        f"got {type(model).__name__}")
    else:
        if isinstance(model, Graph) and input_constructor is None:
            batched = _graph_spelling(model, input_res)
        args, kwargs = _inputs_from(model, batched or input_res, input_constructor)
    custom = {cls: _custom_rule(hook) for cls, hook in (custom_modules_hooks or {}).items()}
    conv = conventions.get(convention).with_modules(custom, ignore_modules)
    try:
        report = _run_view(mode, model, args, kwargs, convention=conv)
    except errors.ShapeError:
        # ptflops' spelling leaves the batch out (it runs on (1, *input_res)); ours includes it.
        # The model's own shape rules decide: the spelling that fits is the one meant.
        if input_constructor is not None or batched is not None or not _is_shape(input_res):
            raise
        batched = (1, *input_res)
        args, kwargs = _inputs_from(model, batched, None)
        report = _run_view(mode, model, args, kwargs, convention=conv)
    if batched is not None:
        print(f"flopcount: input_res {tuple(input_res)} does not fit the model as a whole shape; read as "
              f"ptflops' spelling without the batch, it ran on {batched}", file=ost)
    if verbose:
        for item in report.unsupported:
            print(f"Warning: {item.kind} {item.name} is treated as a zero-op.", file=ost)
    macs, params = report.macs, report.root.trainable_params
    if print_per_layer_stat:
        if isinstance(model, Module) and mode == "eager":
            per_layer_listing(report, model, ost, flops_units, param_units, output_precision)
        else:
            print(report.tabulate("plain"), file=ost)
    if as_strings:
        return (macs_to_string(macs, flops_units, output_precision),
                params_to_string(params, param_units, output_precision))
    return macs, params


__all__ = ["profile", "get_model_complexity_info", "per_layer_listing", "check_engine", "run_engine"]
