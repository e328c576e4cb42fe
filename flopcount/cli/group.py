"""The click group behind ``flopcount``: a default command, and the one place errors become exit codes.

``flopcount MODEL ...`` and ``flopcount profile MODEL ...`` are the same command: the first
word is a subcommand only when it names one (``models``, ``compare``, ``profile``), so a model
file called like a subcommand is reached as ``./models``.

Errors: what a user can fix (a FlopcountError: bad shape, bad file, unknown model, missing
CUDA...; a file that cannot be written; a usage mistake) is ONE line on stderr and exit code 2.
Anything else is a bug, reported in one line with exit code 1. ``--debug`` shows the traceback.
"""

from __future__ import annotations

import sys

import click

from ..options import spelled
from ..runtime.errors import FlopcountError
from ..startup import EXIT_INTERRUPTED, interrupt_was_lost, main_takes_over  # 130, the shell's code for SIGINT
from .options import spell

DEBUG_KEY = "flopcount.debug"
EXIT_USAGE = 2          # bad input, as click uses for usage errors
EXIT_BUG = 1


class CliError(click.ClickException):
    """One line on stderr, then exit with ``exit_code``."""

    def __init__(self, message: str, exit_code: int = EXIT_USAGE):
        super().__init__(" ".join(message.split()))
        self.exit_code = exit_code

    def show(self, file=None) -> None:
        fail_line(self.format_message())


def fail_line(message: str) -> None:
    """``flopcount: error: <message>`` on stderr (``error`` in red on a terminal)."""
    click.echo(click.style("flopcount: error:", fg="red", bold=True) + " " + message, err=True)


def as_cli_error(exc: Exception) -> CliError:
    """The one-line error (and exit code) a user sees for ``exc``."""
    if isinstance(exc, FlopcountError):
        return CliError(spelled(exc, spell))  # the options it names, as this command's flags
    if isinstance(exc, OSError) and exc.filename is not None:
        return CliError(f"{exc.filename}: {exc.strerror or exc}")
    if isinstance(exc, MemoryError):
        # what was not predicted up front (the eager view counts on the real tensors, unchecked:
        # a second run of the user's forward on shapes could change the model's own state)
        return CliError("out of memory running the model on its tensors; count with the graph view "
                        "(--mode graph, without --latency, --measure-memory or --backward: shapes only) "
                        "or use smaller inputs")
    return CliError(f"unexpected {type(exc).__name__}: {exc} (this is a bug in flopcount or in the model's "
                    f"code; run again with --debug for the traceback)", EXIT_BUG)


class DefaultGroup(click.Group):
    """A group whose first argument, when it is not a subcommand, goes to ``default_command``."""

    default_command = "profile"

    def parse_args(self, ctx: click.Context, args: list) -> list:
        if not args:
            click.echo(ctx.get_help())
            ctx.exit(0)
        group_options = set(self.get_help_option_names(ctx)) | {"--version"}
        if args[0] not in self.commands and args[0] not in group_options:
            args = [self.default_command] + list(args)
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except KeyboardInterrupt:
            raise click.Abort() from None  # before click's own handling, which adds a blank line
        except Exception as exc:
            if interrupt_was_lost():
                raise click.Abort() from None  # the error is what the interrupted library left behind
            if ctx.meta.get(DEBUG_KEY):
                raise
            raise as_cli_error(exc) from exc

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode: bool = True, **extra):
        """Run the command; with ``standalone_mode`` (the console script, CliRunner) every
        error ends the process with one line on stderr and its exit code."""
        main_takes_over()  # Ctrl-C from here on is handled below (startup.py's until now)
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            code = super().main(args, prog_name or "flopcount", complete_var, standalone_mode=False, **extra)
        except (click.Abort, KeyboardInterrupt):
            if sys.stderr.isatty():
                click.echo(err=True)  # the terminal echoed "^C" on the current line
            fail_line("interrupted")
            sys.exit(EXIT_INTERRUPTED)
        except CliError as exc:
            exc.show()
            sys.exit(exc.exit_code)
        except click.ClickException as exc:
            where = exc.ctx.command_path if getattr(exc, "ctx", None) is not None else "flopcount"
            fail_line(f"{' '.join(exc.format_message().split())} (see '{where} --help')")
            sys.exit(exc.exit_code)
        sys.exit(code if isinstance(code, int) else 0)


__all__ = ["DefaultGroup", "CliError", "as_cli_error", "fail_line", "DEBUG_KEY", "EXIT_USAGE", "EXIT_BUG"]
