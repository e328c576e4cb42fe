"""A sweep from start to end: the grid's cells, minus those the output already has, through an
executor, each cell's rows written as it finishes."""

from __future__ import annotations

import inspect
import time
from dataclasses import dataclass, field
from typing import Callable

from ..api import profile
from ..hardware import get as hardware_profile
from ..runtime.dtypes import get_dtype
from ..runtime.quantization import weight_format
from . import executors
from .cell import TOTAL
from .grid import SweepError
from .store import Store

# profile()'s keywords a sweep passes to every cell: all but the grid's axes and those it sets itself
_SET_BY_THE_SWEEP = {"input_shape", "batch", "hardware", "dtype", "weights", "framework", "progress"}
PROFILE_OPTIONS = {name for name, param in inspect.signature(profile).parameters.items()
                   if param.kind is param.KEYWORD_ONLY} - _SET_BY_THE_SWEEP


@dataclass
class Outcome:
    """What a sweep did: its cells, those an earlier run had done, those that failed, the time
    it took, and the rows it made when nothing was written to a file."""

    cells: int
    resumed: int = 0
    failed: int = 0
    seconds: float = 0.0
    rows: list = field(default_factory=list)


def check_options(options: dict, cells: list) -> None:
    """Refuse what would fail every cell alike, before the first one runs."""
    unknown = sorted(set(options) - PROFILE_OPTIONS)
    if unknown:
        raise SweepError(f"sweep: unknown option {unknown[0]!r}; a cell takes {', '.join(sorted(PROFILE_OPTIONS))}")
    for name in {c.hardware for c in cells} - {None}:
        hardware_profile(name)
    for name in {c.dtype for c in cells} - {None}:
        get_dtype(name)
    for spec in {c.weights for c in cells} - {None}:
        weight_format(spec)


def run(cells: list, options: dict, *, output: str | None = None, layers: int | None = None,
        workers: int | None = None, ray: str | bool | None = None,
        progress: Callable[[int, int], None] | None = None) -> Outcome:
    """Run ``cells``; rows go to ``output`` (resuming it) or, without one, into the outcome."""
    check_options(options, cells)
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise SweepError(f"workers must be a whole number >= 1, got {workers!r}")
    store = Store(output) if output is not None else None
    todo = [c for c in cells if store is None or c.key not in store.done]
    outcome = Outcome(cells=len(cells), resumed=len(cells) - len(todo))
    tell = progress or (lambda done, total: None)
    tell(outcome.resumed, len(cells))
    start = time.perf_counter()
    finished = 0
    try:
        for _, rows in _executor(todo, options, layers, workers, ray):
            finished += 1
            outcome.failed += rows[-1]["error"] is not None
            if store is not None:
                store.append(rows)
            else:
                outcome.rows += rows
            tell(outcome.resumed + finished, len(cells))
    finally:
        if store is not None:
            store.close()
    if store is not None:
        store.finish([c.key for c in cells])
    outcome.rows.sort(key=lambda row: (row["cell"], row["layer"] == TOTAL))
    outcome.seconds = time.perf_counter() - start
    return outcome


def _executor(cells: list, options: dict, layers, workers, ray):
    if ray not in (None, False):
        return executors.on_ray(cells, options, layers, None if ray is True else ray, workers)
    if workers is not None:
        return executors.local_workers(cells, options, layers, workers)
    return executors.in_process(cells, options, layers)

