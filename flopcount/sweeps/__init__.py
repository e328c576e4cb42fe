"""Sweeps: a grid of independent ``profile()`` runs (or LLM phases), one row of totals per cell.

    >>> import flopcount
    >>> frame = flopcount.sweep(["resnet18", "resnet50"], batch=[1, 8])      # doctest: +SKIP
    >>> frame[["model", "batch", "macs"]]                                      # doctest: +SKIP

Cells run in this process, on local worker processes (``workers=N``) or as Ray tasks
(``ray=True`` or a cluster's address); rows go to a CSV, JSON-lines or Parquet file as cells
finish (``output=``), and a re-run resumes that file. ``flopcount.sweep`` is :func:`sweep`;
see also ``flopcount sweep --help``.
"""

from __future__ import annotations

from typing import Callable

from .cell import COLUMNS, run_cell
from .grid import Cell, SweepError, grid, read_models
from .plot import plot_curves
from .run import Outcome, run
from .store import INT_COLUMNS, read_rows


def sweep(models, *, batch=None, seq=None, resolution=None, input_shape=(), dtype=None, weights=None,
          hardware=None, phase=None, plan=None, output: str | None = None, layers: int | None = None,
          workers: int | None = None, ray: str | bool | None = None,
          progress: Callable[[int, int], None] | None = None, **options):
    """Profile every combination of ``models`` (names, files, folders, or a ``.txt`` file
    listing them) with each value of the axes given, and return the rows as a pandas DataFrame
    (columns :data:`COLUMNS`; a failed cell has its one-line ``error`` and no metrics).

    Axes are lists: ``batch``, ``seq`` (dim 1 of a token input, or the prompt / context of an
    LLM ``phase``), ``resolution`` (an image's height and width), ``dtype``, ``weights``,
    ``hardware``, ``phase`` (``"forward"``, ``"prefill"``, ``"decode"``), ``plan`` (training plans
such as ``"dp=8,tp=2"``, priced per GPU with ``batch`` as the global batch: ``step_time_ms``,
``mfu``, the largest stage's ``peak_memory``). ``input_shape`` is one
    or more templates such as ``"input_ids=1x{seq}"`` filled in per cell. Other keywords are
    ``profile()``'s (``mode``, ``latency``, ``convention``, ``factory_args``...), the same for
    every cell. ``output`` (.csv, .jsonl or .parquet) receives rows as cells finish and is
    resumed by a re-run; ``layers`` adds each cell's modules down to that depth as rows.

    >>> frame = sweep(["resnet18"], batch=[1, 2])                           # doctest: +SKIP
    >>> list(frame["macs"]) == [1814073344, 2 * 1814073344]                 # doctest: +SKIP
    True
    """
    try:
        import pandas
    except ImportError:
        raise SweepError("flopcount.sweep returns a pandas DataFrame: pip install pandas (or write the rows "
                         "to a file with output=, which needs nothing more)") from None
    models = [models] if isinstance(models, str) else list(models)
    cells = grid(read_models(models), batch=batch, seq=seq, resolution=resolution, input_shape=_list(input_shape),
                 dtype=dtype, weights=weights, hardware=hardware, phase=phase, plan=plan)
    outcome = run(cells, options, output=output, layers=layers, workers=workers, ray=ray, progress=progress)
    rows = read_rows(output) if output is not None else outcome.rows
    frame = pandas.DataFrame(rows, columns=COLUMNS)
    return frame.astype({c: "Int64" for c in INT_COLUMNS})   # whole numbers stay whole beside failed cells


def _list(value) -> list:
    return [value] if isinstance(value, str) else list(value or ())


__all__ = ["sweep", "grid", "run", "run_cell", "read_rows", "read_models", "plot_curves", "Cell", "Outcome",
           "SweepError", "COLUMNS"]
