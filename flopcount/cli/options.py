"""The options every profiling command shares: each is a keyword argument of
``flopcount.profile`` under the same name, so a run is ``flopcount.profile(MODEL, **options)``.

Adding one is one click option here (its ``dest`` is the name of ``profile()``'s parameter; a
text that needs parsing gets an entry in ``_FROM_TEXT``); ``tests/cli/test_options.py`` fails
while ``profile()`` and this list disagree. Errors that name an option come from the library
spelled as Python arguments; :func:`spell` writes them as these flags.
"""

from __future__ import annotations

import re

import click

from .. import api, conventions, engines, jax_loading
from ..inputs import format_shape
from ..options import Option
from .inputs import parse_dtype, parse_factory_arg, parse_shape, parse_value

# options of the command line alone: where the output goes and how much it says
CLI_ONLY = ("output", "quiet", "debug")


def _device(ctx, param, value):
    if value is not None and not re.fullmatch(r"cpu|cuda(:\d+)?", value):
        raise click.BadParameter(f"{value!r} is not cpu, cuda or cuda:N", ctx=ctx, param=param)
    return value


OPTIONS = [
    click.option("-i", "--input-shape", "input_shape", multiple=True, metavar="[NAME=]SHAPE",
                 help="Input shape, batch included: 1,3,224,224 or 1x3x224x224; name=1x128 for a named "
                      "input. Repeat for several inputs. Default: the zoo's or the file's input."),
    click.option("--input-value", "input_values", multiple=True, metavar="NAME=V1,V2,...",
                 help="Values of an ONNX file's input that carries a shape (a Reshape target, TopK's "
                      "k), flattened: shape=1,3,-1. The graph is specialized to them."),
    click.option("--dtype", "dtype", multiple=True, metavar="[NAME=]DTYPE",
                 help="A floating dtype (bf16, float16...) runs the model's weights and activations in it; "
                      "token ids stay int64. An integer one (int64) is the dtype of every input built from "
                      "--input-shape, name=int64 of one input: for a model that cannot tell (FILE.py:FACTORY)."),
    click.option("--weights", metavar="FORMAT",
                 help="Store the Linear weights (not lm_head, not tied ones) in a weight format: int8 (a "
                      "float16 scale per output channel), int4 (a float16 scale per 128 weights), fp8 (e4m3), "
                      "int4:g64 ... Parameter memory and the bytes each layer reads follow."),
    click.option("--hardware", metavar="NAME",
                 help="Price every op on this device's roofline, max(FLOPs / peak, bytes / bandwidth), "
                      "with dense datasheet peaks: h100-sxm, a100-80gb, l4, mi300x ... (flopcount hardware "
                      "lists them); cpu is this machine, measured."),
    click.option("-b", "--batch", type=click.IntRange(min=1), help="Batch size: the first dimension of "
                 "every input."),
    click.option("--mode", type=click.Choice(api.MODES), default="graph", show_default=True,
                 help="graph: trace and count every op; eager: module hooks on a real run."),
    click.option("--device", callback=_device, metavar="cpu|cuda",
                 help="Where to run (cuda needs: pip install 'flopcount[cuda12]').  [default: cpu; a zoo "
                      "model that is only counted is built on the meta device (shapes only)]"),
    click.option("--latency", is_flag=True, help="Measure latency per layer and op (runs the model)."),
    click.option("--engine", type=click.Choice(engines.ENGINES), default="flopcount", show_default=True,
                 help="Who runs the model for its latency: flopcount's runtime (with --latency); torch: "
                      "a PyTorch model (FILE.py:FACTORY) timed by PyTorch module by module; onnxruntime: an "
                      "ONNX file timed by onnxruntime's profiler node by node, joined with the counts; jax: "
                      "a JAX model's jitted call timed by JAX as a whole."),
    click.option("--threads", type=click.IntRange(min=1), help="Threads of a timed run on the CPU, in "
                 "every engine (BLAS, flopcount's kernels, PyTorch, onnxruntime).  [default: the cores free "
                 "when timing begins: usable cores less those other processes keep busy]"),
    click.option("--repeat", type=click.IntRange(min=1), default=5, show_default=True,
                 help="Timed runs with --latency (the median is shown)."),
    click.option("--warmup", type=click.IntRange(min=0), default=1, show_default=True,
                 help="Untimed runs before timing with --latency."),
    click.option("--backward", is_flag=True, help="Also count (and with --latency time) the backward pass "
                 "of a training step."),
    click.option("--measure-memory", is_flag=True, help="Run the model and measure its activation peak "
                 "beside the predicted one (with --backward: the training step's too)."),
    click.option("--convention", type=click.Choice(conventions.NAMES), default="flopcount", show_default=True,
                 help="Counting rules: flopcount, or ptflops to match published ptflops/flowflops tables."),
    click.option("--factory-arg", "factory_args", multiple=True, metavar="KEY=VALUE",
                 help="Keyword argument for FILE.py:FACTORY; the value is a Python literal (64, 0.5, "
                      "'relu', (3, 3)) or else a string."),
    click.option("--framework", type=click.Choice(jax_loading.FRAMEWORKS),
                 help="The framework of a FILE.py:FACTORY model that is not detected: jax (the factory returns "
                      "(function or Flax module, example_args), or ((linen_module, variables), example_args))."),
    click.option("--strict", is_flag=True, help="Fail (exit 2) when an op or module has no rule in the "
                 "convention, instead of counting it as 0."),
    click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write to this file (atomically) "
                 "instead of stdout."),
    click.option("-q", "--quiet", is_flag=True, help="No progress bar and no notes on stderr."),
    click.option("--debug", is_flag=True, help="Show the traceback of an error."),
]


def with_options(options: list):
    """A decorator that adds ``options`` (click decorators) to a command, in their order."""
    def decorate(func):
        for option in reversed(options):
            func = option(func)
        return func

    return decorate


run_options = with_options(OPTIONS)   # every profiling command's options


def params() -> list:
    """The click parameters of :data:`OPTIONS`."""
    return run_options(lambda: None).__click_params__


# --- text to profile()'s values -------------------------------------------------------------------

def _by_name_or_position(pairs: list, option: str):
    """[(name or None, value)] as profile() takes it: one value for every input, a list by
    position, or a dict by name."""
    if not pairs:
        return None
    named = [name for name, _ in pairs if name is not None]
    if named and len(named) != len(pairs):
        raise click.UsageError(f"{option}: give every one by name (name=...) or none by name")
    if named:
        return {name: value for name, value in pairs}
    return [value for _, value in pairs]


def _input_shape(texts: tuple):
    return _by_name_or_position([parse_shape(t) for t in texts], "--input-shape")


def _dtype(texts: tuple):
    value = _by_name_or_position([parse_dtype(t) for t in texts], "--dtype")
    return value[-1] if isinstance(value, list) else value  # one dtype for every input: the last given


def _factory_args(texts: tuple):
    return dict(parse_factory_arg(t) for t in texts) or None


def _input_values(texts: tuple):
    return dict(parse_value(t) for t in texts) or None


_FROM_TEXT = {"input_shape": _input_shape, "dtype": _dtype, "factory_args": _factory_args,
              "input_values": _input_values}


def given(ctx: click.Context, name: str) -> bool:
    """Whether the command line gave option ``name`` (not its default)."""
    return ctx.get_parameter_source(name) not in (click.core.ParameterSource.DEFAULT, None)


def profile_options(ctx: click.Context, values: dict) -> dict:
    """``profile()``'s keyword arguments from the command's option values (CLI_ONLY left out)."""
    timed = values["latency"] or values["engine"] != "flopcount"   # engines torch, onnxruntime time it themselves
    if not timed and (given(ctx, "repeat") or given(ctx, "warmup") or given(ctx, "threads")):
        raise click.UsageError("--repeat, --warmup and --threads apply to --latency runs; add --latency", ctx=ctx)
    return {name: _FROM_TEXT.get(name, lambda v: v)(value) for name, value in values.items()
            if name not in CLI_ONLY}


# --- errors in the command line's words ------------------------------------------------------------

def spell(option: Option) -> str:
    """``option`` as the flags that give it: ``--input-shape``, ``-i x=1x4``, ``--mode eager``."""
    found = [p for p in params() if p.name == option.name]
    if not found:
        return str(option)
    flag = max(found[0].opts, key=len)
    if not option.has_value:
        return flag
    value = option.value
    if option.name == "input_shape":
        short = min(found[0].opts, key=len)
        return " ".join(f"{short} {name + '=' if name else ''}{format_shape(dims)}" for name, dims in value)
    if value is True:
        return flag
    if isinstance(value, dict):
        return " ".join(f"{flag} {key}={'...' if item is ... else item}" for key, item in value.items())
    return f"{flag} {value}"


__all__ = ["OPTIONS", "CLI_ONLY", "run_options", "params", "profile_options", "given", "spell"]
