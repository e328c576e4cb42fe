"""One profiling run of the command line: load MODEL, make its inputs, call ``flopcount.profile``.

Counting needs shapes only, so a zoo model is built on the meta device unless the run times
it (``--latency``) or a device was asked for: ``flopcount llama2_7b`` takes no memory.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .. import api, loading
from ..inputs import inputs_for, resolve_inputs
from ..runtime import errors
from ..runtime.dtypes import get_dtype
from ..runtime.graph import Graph
from .inputs import parse_dtype, parse_factory_arg, parse_shape, parse_value


@dataclass
class RunOptions:
    """What to measure, as the command line's options say."""

    mode: str = "graph"
    device: str = "cpu"
    device_given: bool = False
    latency: bool = False
    repeat: int = 5
    warmup: int = 1
    backward: bool = False
    convention: str = "flopcount"
    strict: bool = False
    batch: int | None = None
    dtypes: list = field(default_factory=list)          # parse_dtype results: the inputs'
    model_dtype: str | None = None                      # an unnamed floating --dtype: the model's
    factory_args: dict = field(default_factory=dict)
    engine: str = "flopcount"
    threads: int | None = None                          # --threads: the engine's intra-op threads
    weights: str | None = None
    hardware: str | None = None
    input_values: dict = field(default_factory=dict)    # name -> values (--input-value)
    measure_memory: bool = False

    @classmethod
    def parse(cls, dtypes=(), factory_args=(), input_values=(), **kwargs) -> "RunOptions":
        parsed = [parse_dtype(d) for d in dtypes]
        # one mechanism with profile(dtype=...): an unnamed floating dtype is the model's
        model = [d for name, d in parsed if name is None and get_dtype(d).is_floating_point]
        return cls(dtypes=[(name, d) for name, d in parsed if d not in model or name is not None],
                   model_dtype=model[-1] if model else None,
                   factory_args=dict(parse_factory_arg(a) for a in factory_args),
                   input_values=dict(parse_value(v) for v in input_values), **kwargs)

    def check(self) -> None:
        """Fail, in one line, on a bad --hardware or --weights before any model is loaded."""
        from .. import hardware
        from ..runtime.quantization import weight_format

        if self.hardware is not None:
            hardware.get(self.hardware)
        if self.weights is not None:
            weight_format(self.weights)

    @property
    def zoo_device(self) -> str:
        return self.device if (self.latency or self.measure_memory or self.device_given) else "meta"


def check_device(device: str) -> None:
    """Fail early, in one line, when ``device`` cannot be used (CUDA without CuPy or a GPU)."""
    from ..runtime.device import backend, device as parse_device

    backend(parse_device(device))


def profile(spec: str, shapes: list, opts: RunOptions, steps=None) -> tuple:
    """(Report, Target) for MODEL ``spec`` with ``--input-shape`` texts ``shapes``."""
    import flopcount

    given = [parse_shape(s) for s in shapes]
    say = steps.start if steps is not None else (lambda _: None)
    say(f"loading {spec}")
    target = loading.load(spec, opts.device, zoo_device=opts.zoo_device, given=given, batch=opts.batch,
                          factory_args=opts.factory_args, values=opts.input_values or None)
    if opts.mode == "eager" and isinstance(target.model, Graph):
        raise errors.FlopcountError(f"--mode eager runs a model's Python modules; {target.label} is a graph "
                                    f"(a model file), profile it with --mode graph")
    specs = resolve_inputs(target.expected, given, opts.batch, opts.dtypes, model=target.label)
    target = loading.specialize(target, specs, train=opts.backward)  # a PyTorch module: captured for them
    loading.check_fixed(target, specs)
    api.check_engine(opts.engine, target)
    device = target.device or (opts.zoo_device if target.kind == loading.ZOO else opts.device)
    args, kwargs = inputs_for(target.model, specs, device, keyword=target.kind != loading.ZOO)
    say(f"timing {opts.warmup} warm-up + {opts.repeat} runs" if opts.latency else "counting")
    try:
        with loading.file_errors(target):
            report = flopcount.profile(target.model, *args, mode=opts.mode,
                                       latency=opts.latency and opts.engine == "flopcount",
                                       backward=opts.backward, convention=opts.convention, strict=opts.strict,
                                       warmup=opts.warmup, repeat=opts.repeat, dtype=opts.model_dtype,
                                       weights=opts.weights, hardware=opts.hardware,
                                       measure_memory=opts.measure_memory, **kwargs)
            api.run_engine(report, opts.engine, target, opts.warmup, opts.repeat,
                           inputs=(args, kwargs, opts.input_values), device=device, threads=opts.threads)
    except errors.ShapeError as exc:
        if not given and opts.batch is None:
            raise
        default = ", ".join(s.describe() for s in target.expected) if target.expected else None
        raise errors.ShapeError(
            f"input {', '.join(s.describe() for s in specs)} does not fit {target.label}"
            + (f" (its default input is {default})" if default else "") + f": {exc}") from exc
    report.model = target.label
    return report, target


__all__ = ["RunOptions", "profile", "check_device"]
