"""The options every profiling command shares: each is a keyword argument of
``flopcount.profile`` under the same name, so a run is ``flopcount.profile(MODEL, **options)``.

They are made from ``profile()`` itself: each keyword parameter is ``--its-name`` with its
default, a flag when the default is False, and the help of its entry in the docstring's
``Options:`` block. Adding an option is therefore one keyword parameter and its entry there;
``_FORMS`` holds only what the command line spells otherwise (short flags, text to parse, a
choice or a range). Errors that name an option come from the library spelled as Python
arguments; :func:`spell` writes them as these flags.
"""

from __future__ import annotations

import inspect
import re
import typing

import click

from .. import api, conventions, engines, jax_loading
from ..inputs import format_shape
from ..options import Option
from .inputs import parse_dtype, parse_factory_arg, parse_shape, parse_value

# options of the command line alone: where the output goes and how much it says
CLI_ONLY = ("output", "quiet", "debug")
# profile()'s options the command line gives itself: its progress bar (off with --quiet)
API_ONLY = ("progress",)


def _device(ctx, param, value):
    if value is not None and not re.fullmatch(r"cpu|cuda(:\d+)?", value):
        raise click.BadParameter(f"{value!r} is not cpu, cuda or cuda:N", ctx=ctx, param=param)
    return value


# what the command line spells otherwise than --name VALUE with profile()'s docstring as help
_FORMS = {
    "input_shape": dict(flags=("-i", "--input-shape"), multiple=True, metavar="[NAME=]SHAPE",
                        help="Input shape, batch included: 1,3,224,224 or 1x3x224x224; name=1x128 for a named "
                             "input. Repeat for several inputs. Default: the zoo's or the file's input."),
    "batch": dict(flags=("-b", "--batch"), type=click.IntRange(min=1)),
    "mode": dict(type=click.Choice(api.MODES)),
    "device": dict(callback=_device, metavar="cpu|cuda",
                   help="Where to run (cuda needs: pip install 'flopcount[cuda12]').  [default: cpu; a zoo "
                        "model that is only counted is built on the meta device (shapes only)]"),
    "repeat": dict(type=click.IntRange(min=1)),
    "warmup": dict(type=click.IntRange(min=0)),
    "convention": dict(type=click.Choice(conventions.NAMES)),
    "strict": dict(help="Fail (exit 2) when an op or module has no rule in the convention, instead of "
                        "counting it as 0."),
    "factory_args": dict(flags=("--factory-arg",), multiple=True, metavar="KEY=VALUE",
                         help="Keyword argument for FILE.py:FACTORY; the value is a Python literal (64, 0.5, "
                              "'relu', (3, 3)) or else a string."),
    "hardware": dict(metavar="NAME",
                     help="Price every op on this device's roofline, max(FLOPs / peak, bytes / bandwidth), "
                          "with dense datasheet peaks: h100-sxm, a100-80gb, l4, mi300x ... (flopcount hardware "
                          "lists them); cpu is this machine, measured."),
    "dtype": dict(multiple=True, metavar="[NAME=]DTYPE",
                  help="A floating dtype (bf16, float16...) runs the model's weights and activations in it; "
                       "token ids stay int64. An integer one (int64) is the dtype of every input built from "
                       "--input-shape, name=int64 of one input: for a model that cannot tell (FILE.py:FACTORY)."),
    "weights": dict(metavar="FORMAT"),
    "engine": dict(type=click.Choice(engines.ENGINES)),
    "input_values": dict(flags=("--input-value",), multiple=True, metavar="NAME=V1,V2,...",
                         help="Values of an ONNX file's input that carries a shape (a Reshape target, TopK's "
                              "k), flattened: shape=1,3,-1. The graph is specialized to them."),
    "threads": dict(type=click.IntRange(min=1),
                    help="Threads of a timed run on the CPU, in every engine (BLAS, flopcount's kernels, "
                         "PyTorch, onnxruntime).  [default: the cores free when timing begins: usable cores "
                         "less those other processes keep busy]"),
    "framework": dict(type=click.Choice(jax_loading.FRAMEWORKS)),
}

_CLI_ONLY_OPTIONS = [
    click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write to this file (atomically) "
                 "instead of stdout."),
    click.option("-q", "--quiet", is_flag=True, help="No progress bar and no notes on stderr."),
    click.option("--debug", is_flag=True, help="Show the traceback of an error."),
]


def documented(function) -> dict:
    """{option: its text} from the ``Options:`` block of ``function``'s docstring, where a line
    ``name: text`` starts an entry and deeper-indented lines continue it."""
    lines = inspect.cleandoc(function.__doc__ or "").splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("Options")]
    entries: dict = {}
    name = None
    for line in lines[starts[0] + 1:] if starts else []:
        if not line.strip():
            break
        entry = re.match(r"    (\w+): (.*)", line)
        if entry:
            name = entry.group(1)
            entries[name] = entry.group(2)
        elif name is not None:
            entries[name] += " " + line.strip()
    return entries


def _plain(text: str, flags: dict) -> str:
    """A docstring entry as command-line help: an option named as ``name`` becomes its flag,
    other reST ``literal`` marks are dropped."""
    return re.sub(r"``([^`]+)``", lambda m: flags.get(m.group(1), m.group(1)), text)


def options_of(function) -> list:
    """A click option for each keyword parameter of ``function`` (``profile``), named, typed,
    defaulted and documented as the parameter is, with the form ``_FORMS`` gives it."""
    docs = documented(function)
    hints = typing.get_type_hints(function)
    params = {name: param for name, param in inspect.signature(function).parameters.items()
              if param.kind is param.KEYWORD_ONLY and name not in API_ONLY}
    flags_of = {name: _FORMS.get(name, {}).get("flags", ("--" + name.replace("_", "-"),)) for name in params}
    longest = {name: max(flags, key=len) for name, flags in flags_of.items()}
    made = []
    for name, param in params.items():
        form = {key: value for key, value in _FORMS.get(name, {}).items() if key != "flags"}
        form.setdefault("help", _plain(docs.get(name, ""), longest))
        if param.default is False:
            form["is_flag"] = True
        else:
            form["default"] = param.default
            form.setdefault("show_default", param.default is not None)
            if "type" not in form and int in (typing.get_args(hints.get(name)) or (hints.get(name),)):
                form["type"] = int
        made.append(click.option(*flags_of[name], name, **form))
    return made


OPTIONS = options_of(api.profile) + _CLI_ONLY_OPTIONS


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


__all__ = ["OPTIONS", "CLI_ONLY", "API_ONLY", "documented", "options_of", "run_options", "params", "profile_options", "given", "spell"]
