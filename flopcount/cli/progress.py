"""A progress bar on stderr for the slow steps of a run (loading a big file, timing every op).

It appears only when a step has taken about a second, only on a terminal, and disappears when
the work is done, so quick runs and pipes (``flopcount m --format json | jq``) never see it.
The counters do not report how far they are, so the bar pulses and shows the elapsed time and
the current step.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading

DELAY_S = 1.0  # FLOPCOUNT_PROGRESS_DELAY overrides it (seconds; 0 shows the bar at once)


def delay_s() -> float:
    """How long a run must last before the bar shows."""
    try:
        return max(0.0, float(os.environ.get("FLOPCOUNT_PROGRESS_DELAY", DELAY_S)))
    except ValueError:
        return DELAY_S


def stderr_is_terminal() -> bool:
    """Whether a person may be reading stderr (where a one-line status goes when no bar shows)."""
    return sys.stderr.isatty()


def wanted(quiet: bool) -> bool:
    """A bar only for a person watching: both streams are terminals and --quiet is off."""
    return not quiet and sys.stderr.isatty() and sys.stdout.isatty()


class Steps:
    """Named steps of one run behind a delayed, transient rich progress bar.

        with Steps(enabled=True) as steps:
            steps.start("loading model.onnx")
            ...
            steps.start("timing 5 runs")

    ``console`` is where the bar is drawn (stderr by default); ``delay`` how long a run must
    last before it shows.
    """

    def __init__(self, enabled: bool, console=None, delay: float | None = None):
        self.enabled = enabled
        self.console = console
        self.delay = delay_s() if delay is None else delay
        self._lock = threading.Lock()
        self._progress = None
        self._task = None
        self._timer = None
        self._shown = False
        self._closed = False

    def __enter__(self) -> "Steps":
        if not self.enabled:
            return self
        from rich.console import Console
        from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        console = self.console or Console(stderr=True)
        self._progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                                  TimeElapsedColumn(), console=console, transient=True,
                                  redirect_stdout=False, redirect_stderr=False)
        self._task = self._progress.add_task("starting", total=None)
        self._timer = threading.Timer(self.delay, self._show)
        self._timer.daemon = True
        self._timer.start()
        return self

    def _show(self) -> None:
        with self._lock:
            if not self._closed:
                self._progress.start()
                self._shown = True

    def start(self, description: str) -> None:
        """Name the step now running."""
        if self._progress is not None:
            self._progress.update(self._task, description=description)

    @property
    def shown(self) -> bool:
        """Whether the bar has appeared (the run lasted longer than the delay)."""
        return self._shown

    def __exit__(self, *exc) -> None:
        if self._progress is None:
            return
        with self._lock:
            self._closed = True
            self._timer.cancel()
            if self._shown:
                with contextlib.suppress(Exception):
                    self._progress.stop()


__all__ = ["Steps", "wanted", "stderr_is_terminal", "DELAY_S", "delay_s"]
