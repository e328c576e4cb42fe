"""What the CPU benchmarks share: two threads on both sides, interleaved timing, the header that
names the machine and the command, and the printed table.

Import this module before numpy: it sets the BLAS thread count through the environment, which
OpenBLAS and MKL read once, when they load.
"""

from __future__ import annotations

import datetime
import os
import pathlib
import platform
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Callable

THREADS = int(os.environ.get("BENCH_THREADS", "2"))  # a benchmark that measures one thread sets 1 first
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = str(THREADS)  # both sides get two threads; numpy has not loaded yet

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))  # run from a checkout

START_LOAD = os.getloadavg()


def torch_two_threads():
    """``torch`` with two intra-op threads (the same as numpy's BLAS here)."""
    import torch

    torch.set_num_threads(THREADS)
    return torch


def interleaved(ours: Callable, theirs: Callable, repeat: int, warmup: int = 1) -> tuple[list, list]:
    """Seconds of ``repeat`` calls of each, alternating (ours, theirs), (theirs, ours), ...

    A shared machine's load drifts; alternating puts both sides under the same drift, and the
    changing order cancels any advantage of running first (warm caches, a freshly freed arena).
    """
    for _ in range(warmup):
        ours()
        theirs()
    a, b = [], []
    for i in range(repeat):
        pair = ((ours, a), (theirs, b)) if i % 2 == 0 else ((theirs, b), (ours, a))
        for fn, samples in pair:
            start = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - start)
    return a, b


def median_ms(samples: list) -> float:
    return 1e3 * statistics.median(samples)


def paired_ratio(ours: list, theirs: list) -> float:
    """The median of ``ours[i] / theirs[i]``: each pair ran back to back (``interleaved``), so
    a drift of the machine's speed between pairs cancels, where it moves the two medians apart.
    For a ratio close to 1 that matters: a few percent of drift is the whole margin."""
    return statistics.median(a / b for a, b in zip(ours, theirs))


@dataclass
class Row:
    """One line of a table: flopcount's figure, the peer's, their ratio and the target.

    ``limit`` is the largest ratio that meets the target (``None``: reported, no target).
    ``absolute`` compares flopcount's own figure with ``limit`` instead of the ratio;
    ``agree`` asks the ratio to be within ``limit`` of 1 (two totals that should be equal).
    """

    case: str
    ours: float
    peer: float | None
    limit: float | None = None
    unit: str = "ms"
    absolute: bool = False
    agree: bool = False
    note: str = ""
    paired: float | None = None  # median of per-pair ratios (see paired_ratio), used as the ratio

    @property
    def ratio(self) -> float | None:
        if self.paired is not None:
            return self.paired
        return None if not self.peer else self.ours / self.peer

    @property
    def met(self) -> bool | None:
        if self.limit is None:
            return None
        value = self.ours if self.absolute else self.ratio
        if value is None:
            return None
        return abs(value - 1) <= self.limit if self.agree else value <= self.limit

    def target(self) -> str:
        if self.limit is None:
            return "—"
        if self.agree:
            return f"within {100 * self.limit:g} %"
        return f"< {self.limit:g} {self.unit}" if self.absolute else f"<= {self.limit:g}"

    def ratio_text(self) -> str:
        if self.ratio is None:
            return "—"
        return f"{self.ratio:.6f}" if self.agree else f"{self.ratio:.2f}"


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "—"
    if unit == "ms":
        return f"{value:.1f} ms" if value >= 10 else f"{value:.2f} ms"
    if unit == "%":
        return f"{value:.4f} %"
    if unit in ("MB", "s"):
        return f"{value:.2f} {unit}" if value < 10 else f"{value:.0f} {unit}"
    if unit == "FLOP":
        return f"{value:.7g}"
    return f"{value:.6g} {unit}"


def header(title: str, peer: str, extra: str = "") -> str:
    """Markdown lines: title, date, machine, versions, threads, load and the command."""
    import numpy as np

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    blas = ""
    try:
        config = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        blas = f"{config['name']} {config['version']}"
    except Exception:
        pass
    load = ", ".join(f"{v:.2f}" for v in START_LOAD)
    command = " ".join([os.path.relpath(sys.argv[0])] + sys.argv[1:])
    path = os.environ.get("PYTHONPATH")
    lines = [
        f"### {title}",
        "",
        f"* date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC",
        f"* machine: {cpu}, {os.cpu_count()} cores, {platform.system()} {platform.release()}",
        f"* software: Python {platform.python_version()}, numpy {np.__version__} ({blas}), {peer}",
        f"* threads: {THREADS} for both sides (BLAS environment variables; torch.set_num_threads)",
        f"* OpenBLAS kernels: {_coretype()}",
        f"* load average at start: {load}",
        f"* command: `{'PYTHONPATH=' + path + ' ' if path else ''}python {command}`",
    ]
    if extra:
        lines.append(f"* {extra}")
    return "\n".join(lines)


def _coretype() -> str:
    value = os.environ.get("OPENBLAS_CORETYPE")
    if value:
        return f"OPENBLAS_CORETYPE={value} (from the environment: that core type's kernels, whatever the CPU)"
    return "chosen by OpenBLAS for this CPU (OPENBLAS_CORETYPE not set)"


def table(rows: list, peer: str) -> str:
    """The markdown table: case, flopcount, peer, ratio, target, met."""
    out = [f"| case | flopcount | {peer} | ratio | target | met |",
           "| --- | ---: | ---: | ---: | --- | --- |"]
    for r in rows:
        met = {True: "yes", False: "**no**", None: "—"}[r.met]
        case = r.case + (f" ({r.note})" if r.note else "")
        out.append(f"| {case} | {_fmt(r.ours, r.unit)} | {_fmt(r.peer, r.unit)} | {r.ratio_text()} | "
                   f"{r.target()} | {met} |")
    return "\n".join(out)


def report(title: str, peer_name: str, peer_column: str, rows: list, extra: str = "") -> None:
    """Print the header, the table and the load average at the end."""
    print(header(title, peer_name, extra))
    print(f"* load average at end: {', '.join(f'{v:.2f}' for v in os.getloadavg())}")
    print()
    print(table(rows, peer_column))
    print(flush=True)


def relative_error(ours, theirs) -> float:
    """max |ours - theirs| over max |theirs|: outputs agree when this is near float32 rounding."""
    import numpy as np

    ours, theirs = np.asarray(ours, dtype=np.float64), np.asarray(theirs, dtype=np.float64)
    return float(np.abs(ours - theirs).max() / max(np.abs(theirs).max(), 1e-30))


def check_close(case: str, ours, theirs, tolerance: float = 1e-4) -> None:
    """Refuse to time two computations that do not compute the same thing."""
    error = relative_error(ours, theirs)
    if not error <= tolerance:
        sys.exit(f"{case}: outputs differ (relative error {error:.3g} > {tolerance:g}); not timing")
