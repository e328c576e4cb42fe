"""The command line is a thin adapter over ``flopcount.profile``: every option of one is an
option of the other, under the same name and with the same default."""

from __future__ import annotations

import inspect

import click
import pytest

import flopcount
from flopcount.cli import options as cli_options
from flopcount.options import Option, option_error, spelled

API_ONLY = {"progress"}   # the command line's progress bar (and --quiet) gives it


def _api_options() -> dict:
    params = inspect.signature(flopcount.profile).parameters
    return {name: p.default for name, p in params.items() if p.kind is p.KEYWORD_ONLY and name not in API_ONLY}


def _cli_params() -> dict:
    return {p.name: p for p in cli_options.params() if p.name not in cli_options.CLI_ONLY}


def test_every_profile_option_is_a_command_line_option_and_back():
    api, cli = set(_api_options()), set(_cli_params())
    assert not api - cli, (f"profile() options without a command-line option: {sorted(api - cli)}; add one "
                           f"to OPTIONS in flopcount/cli/options.py with that name as its dest")
    assert not cli - api, (f"command-line options profile() does not take: {sorted(cli - api)}; add the "
                           f"parameter to flopcount.profile (flopcount/api/pipeline.py), or to CLI_ONLY")


def test_the_defaults_are_the_same():
    command = click.Command("profile", params=cli_options.params())
    ctx = command.make_context("profile", [])   # the values of a command line that gives no option
    assert cli_options.profile_options(ctx, ctx.params) == _api_options()


def test_a_request_carries_every_option_without_being_told():
    # adding an option is profile()'s signature and OPTIONS: the request reads it by name as given
    from flopcount.api.request import request_from

    defaults = {**_api_options(), "progress": None, "threads": 3, "warmup": 4}
    request = request_from(flopcount.runtime.nn.Linear(2, 2), (), {}, **defaults)
    raw = {name for name in defaults if name not in ("device", "hardware", "dtype")}  # these are normalised
    assert {name: getattr(request, name) for name in raw} == {name: defaults[name] for name in raw}
    with pytest.raises(AttributeError, match="no field or option 'tiles'"):
        request.tiles


def test_choices_are_read_from_the_library():
    params = _cli_params()
    assert tuple(params["mode"].type.choices) == flopcount.api.MODES
    assert tuple(params["convention"].type.choices) == flopcount.conventions.NAMES


@pytest.mark.parametrize("option, python, flags", [
    (Option("input_shape"), "input_shape", "--input-shape"),
    (Option("input_shape", [(None, (1, 3, 8, 8))]), "input_shape=(1, 3, 8, 8)", "-i 1x3x8x8"),
    (Option("input_shape", [("ids", (1, 16)), ("mask", (1, 16))]), "input_shape={'ids': (1, 16), 'mask': (1, 16)}",
     "-i ids=1x16 -i mask=1x16"),
    (Option("mode", "eager"), "mode='eager'", "--mode eager"),
    (Option("batch", 0), "batch=0", "--batch 0"),
    (Option("dtype", {"ids": "int64"}), "dtype={'ids': 'int64'}", "--dtype ids=int64"),
    (Option("factory_args"), "factory_args", "--factory-arg"),
    (Option("latency", True), "latency=True", "--latency"),
    (Option("input_values", {"shape": ..., "k": ...}), "input_values={'shape': ..., 'k': ...}",
     "--input-value shape=... --input-value k=..."),
    (Option("engine", "torch"), "engine='torch'", "--engine torch"),
])
def test_errors_name_options_in_each_callers_words(option, python, flags):
    exc = option_error(flopcount.ShapeError, "give ", option, " instead")
    assert str(exc) == f"give {python} instead"
    assert spelled(exc, cli_options.spell) == f"give {flags} instead"
