"""The thread count of a timed CPU run: chosen from the cores other work leaves free (a fake
load here; no test can assert timings), or given; set in every pool the run uses and put back
afterwards; named in the report's footer and JSON."""

from __future__ import annotations

import json

import pytest

import flopcount
import flopcount.runtime as rt
from flopcount.cli import main
from flopcount.runtime import threads
from flopcount.runtime.ops import _parallel

nn = rt.nn


def _stat(*cpus) -> str:
    """/proc/stat text with one line per CPU of (busy, idle) jiffies."""
    lines = ["cpu  0 0 0 0 0 0 0 0 0 0"] + [f"cpu{i} {busy} 0 0 {idle} 0 0 0 0 0 0" for i, (busy, idle) in enumerate(cpus)]
    return "\n".join(lines + ["intr 1", "ctxt 2"]) + "\n"


def test_busy_cores_from_two_readings_less_this_process():
    before = _stat((1000, 5000), (1000, 5000))
    after = _stat((1100, 5000), (1000, 5100))           # cpu0 busy all the window, cpu1 idle
    assert threads.busy_from_stat(before, after, None, own_cpu_s=0.0, wall_s=0.1) == pytest.approx(1.0)
    # this process's own CPU time in the window was that busy core: nothing else is busy
    assert threads.busy_from_stat(before, after, None, own_cpu_s=0.1, wall_s=0.1) == pytest.approx(0.0)
    # only the CPUs this process may run on count
    assert threads.busy_from_stat(before, after, {1}, own_cpu_s=0.0, wall_s=0.1) == pytest.approx(0.0)


@pytest.mark.parametrize("cores, busy, want", [(2, 0.0, 2), (2, 1.0, 1), (2, 1.9, 1), (2, 0.4, 2), (2, 0.6, 1),
                                               (16, 3.2, 13), (4, 9.0, 1)])
def test_the_threads_are_the_free_cores_rounded(cores, busy, want):
    choice = threads.choose(cores=cores, busy=lambda: busy)
    assert (choice.threads, choice.cores, choice.busy) == (want, cores, busy)


def test_a_given_count_is_taken_as_it_is_and_measures_nothing():
    def never():
        raise AssertionError("the load is not measured when the count is given")

    assert threads.choose(3, cores=2, busy=never) == threads.ThreadChoice(3, 2, None)
    for bad in (0, 1.5, True):
        with pytest.raises(flopcount.FlopcountError, match=f"at least 1, got {bad!r}"):
            threads.choose(bad, cores=2)


class _Spy(nn.Module):
    """A linear layer noting how many threads flopcount's kernels and BLAS may use while it runs."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.seen = []

    def forward(self, x):
        from threadpoolctl import threadpool_info

        blas = {p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"}
        self.seen.append((_parallel.THREADS, blas))
        return self.fc(x)


def test_a_timed_run_sets_every_pool_and_puts_them_back(monkeypatch):
    pytest.importorskip("threadpoolctl")
    monkeypatch.setattr(_parallel, "THREADS", 2)
    monkeypatch.setattr(threads, "busy_cores", lambda: 1.0)     # one of two cores busy elsewhere
    monkeypatch.setattr(threads, "usable_cores", lambda: 2)
    spy = _Spy()
    report = flopcount.profile(spy, rt.randn(2, 8), mode="eager", latency=True, repeat=1, warmup=0)
    assert report.threads == threads.ThreadChoice(1, 2, 1.0)
    assert spy.seen and all(seen == (1, {1}) for seen in spy.seen)
    assert _parallel.THREADS == 2                               # as before the run
    assert ("threads: 1 of 2 cores (1.0 busy with other work when timing began; --threads sets it); "
            "timed by thread CPU time") in report.table(width=400)
    assert report.to_dict()["threads"] == {"threads": 1, "cores": 2, "busy_cores": 1.0, "chosen": True,
                                           "clock": "thread CPU time"}


def test_counting_alone_chooses_no_threads(monkeypatch):
    monkeypatch.setattr(threads, "busy_cores", lambda: pytest.fail("counting measured the load"))
    report = flopcount.profile(nn.Linear(4, 2), rt.randn(3, 4))
    assert report.threads is None and "threads:" not in report.table()


def test_threads_on_the_command_line_apply_to_flopcount_s_own_engine(monkeypatch):
    from click.testing import CliRunner

    monkeypatch.setattr(threads, "usable_cores", lambda: 4)
    result = CliRunner().invoke(main, ["squeezenet1_1", "-i", "1x3x32x32", "--latency", "--repeat", "1",
                                       "--threads", "1", "--format", "json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["threads"] == {"threads": 1, "cores": 4, "busy_cores": None, "chosen": False,
                                                    "clock": "thread CPU time"}
