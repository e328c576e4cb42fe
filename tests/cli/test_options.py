"""The command line is a thin adapter over ``flopcount.profile``: every option of one is an
option of the other, under the same name and with the same default."""

from __future__ import annotations

import inspect

import click
import pytest

import flopcount
from flopcount.cli import options as cli_options
from flopcount.options import Option, option_error, spelled

def _api_options() -> dict:
    params = inspect.signature(flopcount.profile).parameters
    return {name: p.default for name, p in params.items()
            if p.kind is p.KEYWORD_ONLY and name not in cli_options.API_ONLY}


def _cli_params() -> dict:
    return {p.name: p for p in cli_options.params() if p.name not in cli_options.CLI_ONLY}


def test_every_profile_option_is_a_command_line_option_and_back():
    api, cli = set(_api_options()), set(_cli_params())
    assert api == cli


def test_every_option_has_its_entry_in_the_docstring():
    # the entry is the option's documentation in help(profile) and its --help text
    entries = cli_options.documented(flopcount.profile)
    keywords = set(_api_options()) | set(cli_options.API_ONLY)
    assert not keywords - set(entries), (f"profile() options without an entry in its docstring's Options block "
                                         f"(flopcount/api/pipeline.py): {sorted(keywords - set(entries))}")
    assert not set(entries) - keywords, f"docstring entries for no option: {sorted(set(entries) - keywords)}"
    assert not set(cli_options._FORMS) - keywords, "a command-line form for no option"


def test_a_new_keyword_parameter_is_a_command_line_option_by_itself():
    def profile(model, *, size: int | None = None, tiles: int = 3, fast: bool = False, progress=None):
        """Profile.

        Options:
            size: How big, with ``fast``.
            tiles: Tiles per
                row.
            fast: Go fast.
            progress: Called per step.
        """

    command = click.Command("profile", params=cli_options.with_options(cli_options.options_of(profile))(
        lambda: None).__click_params__)
    by_name = {p.name: p for p in command.params}
    assert set(by_name) == {"size", "tiles", "fast"}
    assert by_name["size"].opts == ["--size"] and by_name["size"].help == "How big, with --fast."
    assert by_name["tiles"].help == "Tiles per row." and by_name["tiles"].show_default
    assert by_name["fast"].is_flag and not by_name["size"].is_flag
    ctx = command.make_context("profile", ["--size", "7", "--fast"])
    assert ctx.params == {"size": 7, "tiles": 3, "fast": True}
    with pytest.raises(click.BadParameter):
        command.make_context("profile", ["--tiles", "many"])


def test_the_defaults_are_the_same():
    command = click.Command("profile", params=cli_options.params())
    ctx = command.make_context("profile", [])   # the values of a command line that gives no option
    assert cli_options.profile_options(ctx, ctx.params) == _api_options()


def test_a_request_carries_every_option_without_being_told():
    # adding an option is profile()'s signature and its docstring entry: the request reads it by name as given
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
