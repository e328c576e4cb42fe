"""The first timed run after installing compiles CPU kernels (numba, cached on disk for later
runs): a timed run during which a kernel compiled is left out and run again, so the first run's
figures are those of the second, and the progress says what is compiling."""

from __future__ import annotations

import pytest

import flopcount
import flopcount.runtime as rt
from flopcount.recording import timing
from flopcount.runtime import cpu_kernels

numba = pytest.importorskip("numba")
nn = rt.nn


def test_runs_during_which_a_kernel_compiled_are_left_out(monkeypatch):
    calls = []

    def run():
        calls.append(len(calls))
        if len(calls) == 2:               # the second run compiles a kernel
            cpu_kernels._compiled[0] += 1
        return len(calls)

    assert timing.without_compilation(run, 3) == [1, 3, 4]


def test_a_kernel_that_compiles_every_run_is_timed_after_a_few_tries():
    def run():
        cpu_kernels._compiled[0] += 1
        return 1

    assert len(timing.without_compilation(run, 2)) == 2     # bounded: REDO_LIMIT tries, then kept


class _CompilesOnItsFirstTimedRun(nn.Module):
    """A linear layer whose forward, once ``armed`` (when timing begins), calls a numba function
    compiled on first use, as flopcount's CPU kernels are: a kernel the counting run did not need."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.armed = False
        self.kernel = numba.njit(cache=False)(lambda n: n + 1)   # a new function: not in any cache

    def forward(self, x):
        if self.armed:
            self.kernel(1)
        return self.fc(x)


def test_the_first_timed_run_leaves_compilation_out_and_says_what_compiles(monkeypatch):
    assert cpu_kernels.enabled()
    timings = []   # (runs made, results kept) of each timing
    real = timing.without_compilation

    def spy(run, repeat):
        net.armed = True
        made = []
        kept = real(lambda: made.append(1) or run(), repeat)
        timings.append((len(made), len(kept)))
        return kept

    monkeypatch.setattr(timing, "without_compilation", spy)
    steps = []
    net = _CompilesOnItsFirstTimedRun()
    before = cpu_kernels.compilations()
    report = flopcount.profile(net, rt.randn(2, 8), mode="eager", latency=True, warmup=0, repeat=2,
                               progress=steps.append)
    assert cpu_kernels.compilations() == before + 1
    compiling = [s for s in steps if s.startswith(flopcount.api.COMPILING)]
    assert compiling and "<lambda>" in compiling[0]
    # the whole-model timing (the first, with --warmup 0) ran once more than it kept: the run
    # that compiled is not among the timed ones
    assert timings[0] == (3, 2) and report.latency_ms is not None
