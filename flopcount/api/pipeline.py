"""``profile()``: what a model costs, as a short pipeline of stages that each return new objects.

    request = request_from(...)             # request.py: every option checked once, inputs in one form
    prepared = specialize(request, load(request))   # loaded, converted, specialized, given its inputs
    with _running(request, prepared) as threads:   # its file, threads and kernel compilations
        report = count(request, prepared)           # a view captures the model's ops and prices each
        report = time_on_engine(request, prepared, report, threads)  # a copy with an engine's times
    report = annotate(request, prepared, report, threads)  # a copy with notes, threads, rooflines

    >>> import flopcount
    >>> flopcount.profile("resnet18").macs
    1814073344
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from typing import Callable, Iterator, cast

from .. import loading
from ..engines import jax_engine
from ..inputs import bind_inputs, inputs_for, resolve_inputs
from ..options import Option, option_error
from ..report import Report
from ..runtime import cpu_kernels, errors
from ..runtime import threads as rt_threads
from ..runtime.graph import Graph
from ..runtime.nn.modules.module import Module
from ..runtime.routing import current_policy, note as routing_note
from ..target import Target
from .engine_runs import check_engine, run_engine
from .request import ProfileRequest, request_from
from .views import run_view

# the progress step while a CPU kernel compiles (the first timed run after installing)
COMPILING = "compiling CPU kernels, once after installing (cached for later runs)"


def profile(model, *inputs, input_shape=None, batch: int | None = None, mode: str = "graph",
            device=None, latency: bool = False, repeat: int = 5, warmup: int = 1, backward: bool = False,
            measure_memory: bool = False, convention: str = "flopcount", strict: bool = False,
            factory_args: dict | None = None, hardware=None, dtype=None, weights=None, engine: str = "flopcount",
            input_values: dict | None = None, threads: int | None = None, framework: str | None = None,
            progress: Callable[[str], None] | None = None, **named_inputs) -> Report:
    """What ``model`` costs: a :class:`~flopcount.report.Report` (rows, totals, memory, latency).

    ``model`` is a Module (``rt.compile(module)`` counts as its module), a Graph, a JAX model
    (a plain or jitted function, a Flax ``nnx.Module``, or ``(linen_module, variables)``, traced
    on ``inputs``: arrays or ``jax.ShapeDtypeStruct``; see :mod:`flopcount.jax_loading`), a zoo
    name (``"resnet50"``) or a model file: ``.onnx``, a native file, or ``file.py:factory``
    (which RUNS that Python file and calls ``factory(**factory_args)``; model files are only
    read). A bare name that is both a zoo model and an existing path means the path
    (``"zoo:name"`` is the zoo model, and a note says so); see :mod:`flopcount.loading`.
    ``inputs`` and ``named_inputs`` are the model's inputs: names are bound to ``forward``'s
    parameters (or a graph's input names), checked before anything runs. Without them
    ``input_shape`` or the model's default input is used. A Module is profiled where its
    parameters live. Bad input of any kind raises a :class:`~flopcount.FlopcountError`
    subclass, and the model's parameters, buffers, flags and hooks are left as they were.

    Options (each is also the command line's ``--option-name``, with the same default):
        input_shape: Input shapes, batch included, when no tensors are given: a shape, a list
            of shapes, or ``{input name: shape}``. Default: the zoo's or the file's input. An
            ONNX file's symbolic dims are bound from it and ``batch`` (or from the inputs given).
        batch: Batch size: the first dimension of every input.
        mode: graph: trace and count every op; eager: module hooks on a real run.
        device: Where to place models built here and inputs made here (``"meta"`` counts without
            allocating). Default: a zoo model that is only counted is built on meta, anything
            that runs on the CPU.
        latency: Measure latency per layer and op (runs the model): ``warmup`` plus ``repeat``
            synchronized runs.
        repeat: Timed runs with ``latency`` (the median is shown).
        warmup: Untimed runs before timing with ``latency``.
        backward: Also count (and with ``latency`` time) the backward pass of a training step.
        measure_memory: Run the model and measure its activation peak beside the predicted one
            (with ``backward``: the training step's too).
        convention: Counting rules: flopcount, or ptflops to match published ptflops/flowflops
            tables.
        strict: Fail when an op or module has no rule in the convention (UnsupportedOpError),
            instead of counting it as 0.
        factory_args: Keyword arguments for ``file.py:factory``.
        hardware: Price every op on this device's roofline, max(FLOPs / peak, bytes /
            bandwidth), with dense datasheet peaks: h100-sxm, a100-80gb, l4, mi300x ...
            (``flopcount.hardware.names()``, or a Profile); cpu is this machine, measured. Each
            op's and row's ``roofline_ms`` and ``bound`` and ``totals["roofline_ms"]`` follow
            (beside the measured latency as ``roofline_fraction`` when timed).
        dtype: A floating dtype (``"bfloat16"``, ``"bf16"``, ``"float16"``...) runs the model's
            weights and activations in it (a Module you pass is converted on a copy); token ids
            stay int64. An integer one (``"int64"``) is the dtype of every input built from
            shapes, and ``{input name: dtype}`` that of one input, for a model that cannot tell.
        weights: Store the Linear weights (not lm_head, not tied ones) in a weight format: int8
            (a float16 scale per output channel), int4 (a float16 scale per 128 weights), fp8
            (e4m3), int4:g64 ... Parameter memory and the bytes each layer reads follow.
        engine: Who runs the model for its latency: flopcount's runtime (with ``latency``);
            torch: a PyTorch model timed by PyTorch module by module; onnxruntime: an ONNX file
            timed by onnxruntime's profiler node by node, joined with the counts; jax: a JAX
            model's jitted call timed by JAX as a whole.
        input_values: Values of an ONNX file's inputs that carry a shape (a Reshape target,
            TopK's k), ``{input name: values}``; the tensors given bind them too. The graph is
            specialized to them, as to shapes.
        threads: Threads of a timed run on the CPU, in every engine (BLAS, flopcount's kernels,
            PyTorch, onnxruntime). Default: the cores free when timing begins (usable cores
            less those other processes keep busy), named in ``report.threads``.
        framework: The framework of a ``file.py:factory`` model that is not detected: jax (the
            factory returns (function or Flax module, example_args), or ((linen_module,
            variables), example_args)).
        progress: Called with the name of each step as it starts (``"loading resnet50"``,
            ``"counting"``); the command line's progress bar.

    The engines: ``"torch"`` measures a PyTorch model's latency with PyTorch itself, module by
    module (see :mod:`flopcount.engines.torch_engine`); ``"onnxruntime"`` times an ONNX file as
    onnxruntime deploys it (its graph optimizations, the CPU or CUDA provider by ``device``) and
    fills ``report.engine_nodes`` (achieved FLOP/s and bytes/s per node; see
    :mod:`flopcount.engines.onnxruntime_engine`); ``"jax"`` times a JAX model's jitted call (XLA
    fuses its ops; see :mod:`flopcount.engines.jax_engine`). Weight formats:
    :mod:`flopcount.runtime.quantization`; threads: :mod:`flopcount.runtime.threads`.

    >>> import flopcount, flopcount.runtime as rt
    >>> report = flopcount.profile(rt.nn.Linear(3, 2), rt.ones(4, 3))
    >>> report.macs, report.flops, report.params
    (24, 56, 8)
    """
    # the keyword options as given (this signature holds their defaults)
    options = {name: value for name, value in locals().items() if name not in ("model", "inputs", "named_inputs")}
    request = request_from(model, inputs, named_inputs, **options)
    prepared = specialize(request, load(request))
    with _running(request, prepared) as threads:
        report = count(request, prepared)
        report = time_on_engine(request, prepared, report, threads)
    return annotate(request, prepared, report, threads)


@dataclass(frozen=True)
class Prepared:
    """A model ready to run: its :class:`~flopcount.target.Target` (converted and specialized),
    the ``args`` and ``kwargs`` it runs on, and ``specs``, the inputs built from shapes (None
    when the tensors were given)."""

    target: Target
    args: tuple
    kwargs: dict
    specs: list | None


def load(request: ProfileRequest) -> Target:
    """The model read, built or traced (see :mod:`flopcount.loading`); a graph refused in eager mode."""
    model = request.model
    if isinstance(model, (str, os.PathLike)):
        request.say(f"loading {os.fspath(model)}")
    target = loading.load(model, request.device, zoo_device=request.zoo_device, given=request.given,
                          batch=request.batch, factory_args=request.factory_args, values=request.values or None,
                          framework=request.framework)
    if request.mode == "eager" and (isinstance(target.model, Graph) or target.kind == loading.JAX):
        what = "a JAX model, traced into a graph" if target.kind == loading.JAX else "a graph (a model file)"
        raise option_error(errors.FlopcountError, Option("mode", "eager"), f" runs a model's Python modules; "
                           f"{target.name} is {what}, profile it with ", Option("mode", "graph"))
    return target


def specialize(request: ProfileRequest, target: Target) -> Prepared:
    """``target`` captured for the tensors given (a PyTorch or JAX model), in ``dtype``, with its
    weights in the weight format, then given its inputs: the tensors given, bound to its input
    names, or inputs built from the shapes given (or its default ones), for which it is specialized."""
    inputs, named = request.args, request.kwargs
    if target.kind in (loading.TORCH, loading.JAX) and (inputs or named):
        # captured for the inputs given, the graph then takes inputs made from their shapes
        target = loading.specialize(target, examples=(inputs, named), train=request.backward)
        inputs, named = (), {}
    if request.dtype is not None:
        target = loading.in_dtype(target, request.dtype)
        inputs, named = _floats_in(request.dtype, inputs), dict(zip(named, _floats_in(request.dtype, named.values())))
    if request.weight_format is not None:
        target = loading.with_weights(target, request.weight_format)
    if request.onnx_file and named:  # inputs whose values the graph took are no longer its inputs
        kept = {v.name for v in cast(Graph, target.model).inputs}
        named = {k: v for k, v in named.items() if k in kept}
    specs = None
    if inputs or named:
        if request.input_dtypes:
            given = ", ".join(f"{name}={value}" if name else value for name, value in request.input_dtypes)
            raise errors.FlopcountError(f"dtype {given}: an integer or per-input dtype is for inputs built "
                                        f"from shapes; the tensors given keep theirs (cast them)")
        args, kwargs = bind_inputs(target.model, inputs, named)
    else:
        specs = resolve_inputs(target.expected, request.given, request.batch, dtypes=request.input_dtypes,
                               model=target.name)
        target = loading.specialize(target, specs, train=request.backward)  # a PyTorch module: captured for them
        loading.check_fixed(target, specs)
        args, kwargs = inputs_for(target.model, specs, _input_device(target, request.device, request.zoo_device),
                                  keyword=target.kind != loading.ZOO)
    check_engine(request.engine, target)
    return Prepared(target, tuple(args), kwargs, specs)


@contextlib.contextmanager
def _running(request: ProfileRequest, prepared: Prepared) -> Iterator:
    """Where the model runs: its file named in its errors, a timed CPU run on the threads chosen
    (yielded: a ThreadChoice, or None), each CPU kernel's compilation said, and a ShapeError on
    inputs built from the shapes given naming them."""
    # spinning thread pools on busy cores time the machine's load, not the model: on the CPU a
    # timed run takes its threads from the cores free now unless told (runtime/threads.py)
    if request.engine == jax_engine.NAME and request.threads is not None:
        raise option_error(errors.FlopcountError, Option("threads", request.threads), " applies to engines that "
                           "flopcount can limit; engine 'jax' runs on XLA's own thread pool")
    # (XLA's thread pool is its own: a JAX run is not limited, nor said to be)
    choice = (rt_threads.choose(request.threads)
              if request.timed and _on_cpu(request.device) and request.engine != jax_engine.NAME else None)
    request.say((f"timing {request.warmup} warm-up + {request.repeat} runs"
                 + (f" on {choice.threads} thread(s)" if choice else "")) if request.timed else "counting")
    try:
        with contextlib.ExitStack() as scope:
            scope.enter_context(loading.file_errors(prepared.target))
            if choice is not None:
                scope.enter_context(rt_threads.limited(choice.threads))
            if request.timed:
                scope.enter_context(cpu_kernels.on_compile(lambda kernel: request.say(f"{COMPILING}: {kernel}")))
            yield choice
    except errors.ShapeError as exc:
        if (prepared.specs is None or (not request.given and request.batch is None)
                or isinstance(exc, errors.MemoryLimitError)):
            raise
        raise _does_not_fit(prepared.target, prepared.specs, exc) from exc


def count(request: ProfileRequest, prepared: Prepared) -> Report:
    """The prepared model run in the view asked for: it captures the ops that run and prices
    each one under the convention (timed by flopcount's runtime when ``latency``)."""
    return run_view(request.mode, prepared.target.model, prepared.args, prepared.kwargs,
                    convention=request.counting, latency=request.latency and request.engine == "flopcount",
                    backward=request.backward, warmup=request.warmup, repeat=request.repeat,
                    measure_memory=request.measure_memory, name=prepared.target.label)


def time_on_engine(request: ProfileRequest, prepared: Prepared, report: Report, threads) -> Report:
    """A copy of ``report`` with the engine's times (``report`` itself for engine "flopcount")."""
    return run_engine(report, request.engine, prepared.target, request.warmup, request.repeat,
                      inputs=(prepared.args, prepared.kwargs, request.values), device=request.device,
                      threads=threads.threads if threads else request.threads)


def annotate(request: ProfileRequest, prepared: Prepared, report: Report, threads) -> Report:
    """A copy of ``report`` with how the model was loaded in its notes (and a routing policy's,
    for experts that ran on meta) and the thread choice; refused under ``strict`` when anything
    ran without a rule; priced on the hardware asked for."""
    net = prepared.target.model
    routing = [routing_note(current_policy())] if isinstance(net, Module) and _routes_experts(net) else []
    report = report.with_(notes=list(prepared.target.notes) + report.notes + routing, threads=threads)
    if request.strict and report.unsupported:
        raise errors.UnsupportedOpError(
            f"no rule in the {report.convention} convention for: " + "; ".join(str(u) for u in report.unsupported))
    return report.with_hardware(request.hardware) if request.hardware is not None else report


def _on_cpu(device) -> bool:
    return str(device).split(":")[0] == "cpu"


def _input_device(target: Target, device: str, zoo_device: str):
    """Where the inputs made for ``target`` go: where a file or object model lives."""
    if target.device is not None:
        return target.device
    if target.kind == loading.OBJECT:
        return _parameter_device(target.model) or device
    return zoo_device if target.kind == loading.ZOO else device


def _parameter_device(model):
    if isinstance(model, Graph):
        return model.device
    for p in model.parameters():
        return p.device
    for b in model.buffers():
        return b.device
    return None


def _routes_experts(net: Module) -> bool:
    """Whether ``net`` has mixture-of-experts blocks that ran on meta (their routing a policy's)."""
    return any(hasattr(m, "top_k") and hasattr(getattr(m, "experts", None), "num_experts")
               and any(p.data is None for p in m.experts.parameters()) for m in net.modules())


def _does_not_fit(target: Target, specs: list, exc: errors.ShapeError) -> errors.ShapeError:
    """A model's ShapeError on inputs built from the shapes given: say which inputs, and the
    model's default ones."""
    default = ", ".join(s.describe() for s in target.expected) if target.expected else None
    return errors.ShapeError(
        f"input {', '.join(s.describe() for s in specs)} does not fit {target.name}"
        + (f" (its default input is {default})" if default else "") + f": {exc}")


def _floats_in(dtype, values) -> tuple:
    """The floating tensors among ``values`` cast to ``dtype``; anything else as it is."""
    from ..runtime.tensor import Tensor

    return tuple(v.to(dtype) if isinstance(v, Tensor) and v.dtype.is_floating_point else v for v in values)


__all__ = ["profile", "load", "specialize", "count", "time_on_engine", "annotate", "Prepared", "COMPILING"]
