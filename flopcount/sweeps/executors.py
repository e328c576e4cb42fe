"""Where a sweep's cells run: in this process, on local worker processes, or as Ray tasks.

Each executor takes cells and yields ``(cell, rows)`` as cells finish (in any order), keeping
only a few cells in flight at a time, so a sweep of any size holds a bounded number of results.
Cells never raise (:func:`~flopcount.sweep.cell.run_cell` records failures in their rows); a
worker that dies takes only the cells it was running, recorded as failed.
"""

from __future__ import annotations

import logging
import multiprocessing
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Iterable, Iterator

from .cell import failed_rows, run_cell, run_cells
from .grid import Cell

IN_FLIGHT_PER_WORKER = 4
MAX_CHUNK = 8   # cells per task to a local worker: fewer round trips, and a progress step per chunk


def chunks(cells: list, workers: int) -> list:
    """Consecutive cells in tasks small enough to keep every worker busy to the end."""
    size = max(1, min(MAX_CHUNK, len(cells) // (workers * IN_FLIGHT_PER_WORKER * 4)))
    return [cells[i:i + size] for i in range(0, len(cells), size)]


def in_process(cells: Iterable[Cell], options: dict, layers: int | None) -> Iterator[tuple]:
    for cell in cells:
        yield cell, run_cell(cell, options, layers)


def _import_flopcount() -> None:
    import flopcount.api  # noqa: F401 - a worker pays the import once, before its first cell


def local_workers(cells: list, options: dict, layers: int | None, workers: int) -> Iterator[tuple]:
    """Cells on ``workers`` local processes (started fresh, not forked: the parent's threads and
    BLAS pools do not survive a fork), a few consecutive cells per task. A worker that dies
    fails the cells it held; the pool is started again for the rest."""
    todo = iter(chunks(list(cells), workers))
    context = multiprocessing.get_context("spawn")
    while True:
        pool = ProcessPoolExecutor(workers, mp_context=context, initializer=_import_flopcount)
        pending: dict = {}
        broken = False
        try:
            _fill(pending, todo, workers * IN_FLIGHT_PER_WORKER,
                  lambda chunk: pool.submit(run_cells, chunk, options, layers))
            while pending:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    chunk = pending.pop(future)
                    try:
                        yield from future.result()
                    except BrokenProcessPool:
                        broken = True
                        for cell in chunk:
                            yield cell, failed_rows(cell, "the worker process running this cell died "
                                                          "(out of memory, or a crash in native code)")
                if broken:
                    for future, chunk in list(pending.items()):
                        pending.pop(future)
                        for cell in chunk:
                            yield cell, failed_rows(cell, "its worker pool broke while it waited; run the "
                                                          "sweep again to retry it")
                    break
                _fill(pending, todo, workers * IN_FLIGHT_PER_WORKER,
                      lambda chunk: pool.submit(run_cells, chunk, options, layers))
        finally:
            pool.shutdown(wait=not broken, cancel_futures=True)
        if not broken:
            return


def _fill(pending: dict, todo: Iterator, limit: int, submit) -> None:
    while len(pending) < limit:
        item = next(todo, None)
        if item is None:
            return
        pending[submit(item)] = item


def _needs_gpu(options: dict) -> bool:
    return bool(options.get("latency") or options.get("measure_memory")) and \
        str(options.get("device") or "").startswith("cuda")


def on_ray(cells: Iterable[Cell], options: dict, layers: int | None, address: str | None,
           workers: int | None = None) -> Iterator[tuple]:
    """Cells as Ray tasks on the cluster at ``address`` (None: the one this process is
    connected to, else a local one started here). A cell that runs the model on a GPU asks
    for ``num_gpus=1``; counting cells ask for one CPU."""
    import ray

    started = not ray.is_initialized()
    if started:
        ray.init(address=address, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
    try:
        resources = {"num_cpus": 1, "num_gpus": 1} if _needs_gpu(options) else {"num_cpus": 1}
        task = ray.remote(run_cell).options(**resources, max_retries=0)
        limit = IN_FLIGHT_PER_WORKER * (workers or max(1, int(ray.cluster_resources().get("CPU", 1))))
        todo = iter(cells)
        pending: dict = {}
        _fill(pending, todo, limit, lambda cell: task.remote(cell, options, layers))
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                cell = pending.pop(ref)
                try:
                    yield cell, ray.get(ref)
                except ray.exceptions.RayError as exc:
                    yield cell, failed_rows(cell, f"the Ray task failed: {' '.join(str(exc).split())[:300]}")
            _fill(pending, todo, limit, lambda cell: task.remote(cell, options, layers))
    finally:
        if started:
            ray.shutdown()
