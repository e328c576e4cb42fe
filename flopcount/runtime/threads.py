"""How many threads a timed run uses, and setting that number in every thread pool it runs on.

BLAS (OpenBLAS, MKL), PyTorch's OpenMP pool and onnxruntime spin while they wait for work, so
they are fast on idle cores and very slow on busy ones: with one other busy process on a 2-core
machine, two threads made resnet18's median dozens of times longer, one thread little more than
twice as long (benchmarks/RESULTS.md, "Figures behind design choices in the code"). So a
timed run takes its thread count from the cores free when it starts, unless told:

* the cores this process may run on (``os.sched_getaffinity``, else ``os.cpu_count``), less
* the cores other processes keep busy: each of those cores' busy share over a short sample of
  ``/proc/stat`` while this process sleeps, less this process's own CPU time in that window
  (elsewhere: the one-minute load average less this process);
* rounded to the nearest whole core, at least one.

The number is applied to BLAS (through threadpoolctl), to flopcount's own kernel threads
(``ops/_parallel``), to PyTorch's intra-op threads when PyTorch is loaded, and handed to
onnxruntime as its intra-op threads.

    choice = choose(None)                  # measured: ThreadChoice(threads=1, cores=2, busy=1.02)
    choice = choose(4)                     # told: ThreadChoice(threads=4, cores=2, busy=None)
    with limited(choice.threads):
        ...                                # the timed runs
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from dataclasses import dataclass

from .errors import FlopcountError

SAMPLE_S = 0.1   # long enough for a busy core to show as busy, short beside a timed run
_STAT = "/proc/stat"


@dataclass(frozen=True)
class ThreadChoice:
    """``threads`` for the timed runs, of ``cores`` usable; ``busy``: the cores other work kept
    busy when they were chosen (None when the number was given, not chosen)."""

    threads: int
    cores: int
    busy: float | None = None

    @property
    def clock(self) -> str:
        """What the run's times measure: the thread's CPU time on one thread, else wall time."""
        from .clock import for_threads

        return for_threads(self.threads)

    def describe(self) -> str:
        """The report footer's words for it.

        >>> ThreadChoice(1, 2, 1.02).describe()
        '1 of 2 cores (1.0 busy with other work when timing began; --threads sets it); timed by thread CPU time'
        >>> ThreadChoice(4, 8).describe()
        '4 (--threads), 8 cores; timed by wall time'
        """
        if self.busy is None:
            return f"{self.threads} (--threads), {self.cores} cores; timed by {self.clock}"
        return (f"{self.threads} of {self.cores} cores ({self.busy:.1f} busy with other work when timing began; "
                f"--threads sets it); timed by {self.clock}")

    def to_dict(self) -> dict:
        return {"threads": self.threads, "cores": self.cores, "busy_cores": self.busy,
                "chosen": self.busy is not None, "clock": self.clock}


def usable_cores() -> int:
    """The cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def threads_for(cores: int, busy: float) -> int:
    """The cores left free by ``busy`` cores of other work, rounded, at least 1.

    >>> threads_for(2, 0.0), threads_for(2, 1.0), threads_for(2, 0.3), threads_for(8, 2.6), threads_for(2, 5.0)
    (2, 1, 2, 5, 1)
    """
    return max(1, min(cores, int(cores - busy + 0.5)))


def _cpu_times(text: str, cpus: set | None) -> dict:
    """{cpu index: (busy jiffies, all jiffies)} of the per-CPU lines of ``/proc/stat``'s text."""
    out = {}
    for line in text.splitlines():
        name, _, rest = line.partition(" ")
        if not name.startswith("cpu") or name == "cpu" or not name[3:].isdigit():
            continue
        index = int(name[3:])
        if cpus is not None and index not in cpus:
            continue
        fields = [int(v) for v in rest.split()]
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)       # idle + iowait
        counted = fields[:8]                                           # guest time is inside user
        out[index] = (sum(counted) - idle, sum(counted))
    return out


def busy_from_stat(before: str, after: str, cpus: set | None, own_cpu_s: float, wall_s: float) -> float:
    """Cores kept busy by other work between two readings of ``/proc/stat`` (on ``cpus``, all
    when None), less this process's own ``own_cpu_s`` CPU seconds in those ``wall_s`` seconds.

    >>> head = "cpu  0 0 0 0\\ncpu0 100 0 0 900 0 0 0 0\\ncpu1 100 0 0 900 0 0 0 0\\n"
    >>> tail = "cpu  0 0 0 0\\ncpu0 200 0 0 900 0 0 0 0\\ncpu1 110 0 0 990 0 0 0 0\\n"
    >>> round(busy_from_stat(head, tail, None, 0.0, 1.0), 2)      # cpu0 all busy, cpu1 10%
    1.1
    """
    first, second = _cpu_times(before, cpus), _cpu_times(after, cpus)
    busy = 0.0
    for cpu, (b1, t1) in second.items():
        b0, t0 = first.get(cpu, (b1, t1))
        if t1 > t0:
            busy += (b1 - b0) / (t1 - t0)
    return max(0.0, busy - own_cpu_s / wall_s if wall_s > 0 else busy)


def busy_cores(sample_s: float = SAMPLE_S) -> float:
    """Cores other processes keep busy now (module docstring)."""
    try:
        cpus = os.sched_getaffinity(0)
    except (AttributeError, OSError):
        cpus = None
    try:
        with open(_STAT) as f:
            before = f.read()
        own, wall = time.process_time(), time.perf_counter()
        time.sleep(sample_s)
        own, wall = time.process_time() - own, time.perf_counter() - wall
        with open(_STAT) as f:
            after = f.read()
        return busy_from_stat(before, after, cpus, own, wall)
    except OSError:
        pass
    try:
        return max(0.0, os.getloadavg()[0] - 1.0)   # this process is one of the runnable ones
    except (AttributeError, OSError):
        return 0.0


def choose(threads: int | None = None, *, cores: int | None = None, busy=None) -> ThreadChoice:
    """``threads`` when given; else the cores free now (``busy()`` measures the busy ones;
    :func:`busy_cores` by default).

    >>> choose(3, cores=8)
    ThreadChoice(threads=3, cores=8, busy=None)
    >>> choose(cores=2, busy=lambda: 1.0)
    ThreadChoice(threads=1, cores=2, busy=1.0)
    """
    cores = cores or usable_cores()
    if threads is not None:
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise FlopcountError(f"threads must be a whole number of at least 1, got {threads!r}")
        return ThreadChoice(int(threads), cores)
    measured = (busy or busy_cores)()
    return ThreadChoice(threads_for(cores, measured), cores, measured)


# --- setting it ------------------------------------------------------------------------------

_lock = threading.Lock()
_depth = 0            # limited() blocks open in this process (profiles may run in several threads)
_undo: list = []


def _set_everywhere(n: int) -> list:
    """Set ``n`` threads in every pool there is; the callables that restore each one."""
    from . import clock
    from .ops import _parallel

    # one thread: the work runs on the measuring thread, timed by its own CPU time (clock.py)
    undo = [clock.set_for(n), _parallel.set_threads(n)]
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:   # BLAS keeps its own count (OMP_NUM_THREADS / OPENBLAS_NUM_THREADS)
        pass
    else:
        limits = threadpool_limits(limits=n, user_api="blas")
        undo.append(limits.restore_original_limits)
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "set_num_threads"):
        before = torch.get_num_threads()
        torch.set_num_threads(n)
        undo.append(lambda: torch.set_num_threads(before))
    return undo


@contextlib.contextmanager
def limited(n: int):
    """Every thread pool at ``n`` threads inside the block, as before after it. Nested or
    concurrent blocks (profiles in several threads) keep the first block's number until the
    last one ends: the pools are the process's, not a thread's."""
    global _depth, _undo
    with _lock:
        if _depth == 0:
            _undo = _set_everywhere(n)
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                for restore in reversed(_undo):
                    restore()
                _undo = []


__all__ = ["ThreadChoice", "choose", "limited", "threads_for", "busy_cores", "busy_from_stat", "usable_cores"]
