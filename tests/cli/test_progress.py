"""The progress bar: only for slow steps, only on a terminal, gone when the work is done."""

from __future__ import annotations

import io
import time

from rich.console import Console

from flopcount.cli import progress


def _console() -> tuple:
    buffer = io.StringIO()
    return buffer, Console(file=buffer, force_terminal=True, width=80)


def test_a_slow_step_shows_its_name():
    buffer, console = _console()
    with progress.Steps(True, console=console, delay=0.0) as steps:
        steps.start("timing 5 runs")
        deadline = time.monotonic() + 5
        while not steps.shown and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.3)                                    # a refresh or two
    assert steps.shown and "timing 5 runs" in buffer.getvalue()


def test_a_quick_run_shows_nothing():
    buffer, console = _console()
    with progress.Steps(True, console=console, delay=10.0) as steps:
        steps.start("counting")
    assert not steps.shown and buffer.getvalue() == ""


def test_disabled_is_silent():
    buffer, console = _console()
    with progress.Steps(False, console=console, delay=0.0) as steps:
        steps.start("loading")
        time.sleep(0.05)
    assert buffer.getvalue() == ""


def test_wanted_only_on_terminals_without_quiet(monkeypatch):
    class Stream(io.StringIO):
        def __init__(self, tty):
            super().__init__()
            self.tty = tty

        def isatty(self):
            return self.tty

    for out_tty, err_tty, quiet, expected in [(True, True, False, True), (True, True, True, False),
                                              (False, True, False, False), (True, False, False, False)]:
        monkeypatch.setattr("sys.stdout", Stream(out_tty))
        monkeypatch.setattr("sys.stderr", Stream(err_tty))
        assert progress.wanted(quiet) is expected


def test_kernels_compiling_are_said_once_on_stderr_where_no_bar_shows(monkeypatch):
    # stdout into a pipe shows no bar: the first run's compilation (about 15 s) is still said
    # on the terminal's stderr, once; with stderr not a terminal either, nothing is said
    import json

    from click.testing import CliRunner

    from flopcount import api
    from flopcount.cli import main

    real = api.profile

    def compiling(model, progress=None, **options):
        for kernel in ("conv", "gemm"):
            progress(f"{api.COMPILING}: {kernel}")
        return real(model, progress=progress, **options)

    monkeypatch.setattr(api, "profile", compiling)
    assert CliRunner().invoke(main, ["resnet18", "--format", "json"]).stderr == ""
    monkeypatch.setattr(progress, "stderr_is_terminal", lambda: True)
    result = CliRunner().invoke(main, ["resnet18", "--format", "json"])
    assert result.exit_code == 0, result.output
    assert result.stderr == f"flopcount: {api.COMPILING}\n"
    assert json.loads(result.stdout)["totals"]["macs"] > 0
    quiet = CliRunner().invoke(main, ["resnet18", "--format", "json", "--quiet"])
    assert quiet.stderr == ""
