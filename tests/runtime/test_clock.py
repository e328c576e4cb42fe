"""The clock of timed CPU runs (runtime/clock.py): the measuring thread's CPU time when a run is
on one thread, wall time otherwise. No test asserts a duration: each compares two clocks read
around the same work, or work another thread does that one clock must not see."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import flopcount
import flopcount.runtime as rt
from flopcount.runtime import clock, threads
from flopcount.runtime.backend import CPUBackend


def _spin_elsewhere(seconds: float) -> threading.Thread:
    """A thread that keeps a core busy for ``seconds`` of wall time (pure Python: it holds the GIL
    only between bytecodes, so the measuring thread runs too)."""
    def spin():
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            pass

    thread = threading.Thread(target=spin)
    thread.start()
    return thread


def test_one_thread_reads_the_thread_cpu_clock_and_more_threads_the_wall():
    assert clock.current() == clock.WALL                     # outside any timed run
    with threads.limited(1):
        assert clock.current() == clock.THREAD_CPU
        with threads.limited(2):                             # nested: the outer block's count stands
            assert clock.current() == clock.THREAD_CPU
    assert clock.current() == clock.WALL
    with threads.limited(2):
        assert clock.current() == clock.WALL
    assert [clock.for_threads(n) for n in (1, 2, 8, None)] == [clock.THREAD_CPU] + [clock.WALL] * 3


def test_a_sleep_is_not_the_threads_cpu_time_but_is_wall_time():
    # sleeping stands for being descheduled: the thread does not run, the wall clock goes on
    be = CPUBackend()
    with clock.measuring(1):
        start = be.timer_start()
        time.sleep(0.05)
        cpu = be.timer_stop(start)
    with clock.measuring(2):
        start = be.timer_start()
        time.sleep(0.05)
        wall = be.timer_stop(start)
    assert wall >= 0.05 and cpu < wall / 5


def test_a_busy_thread_beside_the_measured_op_is_not_in_its_time():
    # another thread spins for the whole span; a sleep is the only thing the measuring thread does
    spinner = _spin_elsewhere(0.3)
    try:
        with clock.measuring(1):
            begun = clock.read()
            time.sleep(0.1)
            own = clock.read() - begun
    finally:
        spinner.join()
    assert own < 0.05


def test_a_gemm_on_one_blas_thread_runs_on_the_measuring_thread():
    # if BLAS handed the work to a thread of its own, the caller's CPU time would be near zero
    pytest.importorskip("threadpoolctl")
    a = np.random.default_rng(0).standard_normal((512, 512)).astype(np.float32)
    with threads.limited(1):
        a @ a
        wall, cpu = [], []
        for _ in range(3):
            w0, c0 = time.perf_counter(), time.thread_time()
            a @ a
            wall.append(time.perf_counter() - w0)
            cpu.append(time.thread_time() - c0)
    # the thread ran at least part of every product; the fastest one nearly all of it
    assert min(cpu) > 0 and max(c / w for c, w in zip(cpu, wall)) > 0.5


def test_a_timed_one_thread_run_measures_the_ops_on_the_thread_clock(monkeypatch):
    # every span of the run (whole, per op) reads clock.read(): count the reads on each clock
    seen = []
    real = clock.read
    monkeypatch.setattr(clock, "read", lambda: seen.append(clock.current()) or real())
    report = flopcount.profile(rt.nn.Linear(16, 16), rt.randn(4, 16), latency=True, repeat=2, warmup=0, threads=1)
    assert seen and set(seen) == {clock.THREAD_CPU}
    assert report.threads.clock == clock.THREAD_CPU and report.latency_ms > 0
    seen.clear()
    flopcount.profile(rt.nn.Linear(16, 16), rt.randn(4, 16), latency=True, repeat=2, warmup=0, threads=2)
    assert seen and set(seen) == {clock.WALL}
    assert clock.current() == clock.WALL
