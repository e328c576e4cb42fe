"""One cell of a sweep run: its ``profile()`` (or LLM phase) and the rows it yields.

A cell never raises: what fails is recorded in the row's ``error`` column as one line, so one
bad cell never stops a sweep. Every row has the same columns (:data:`COLUMNS`), whatever the
cell computed, so CSV, JSON lines and Parquet files hold one table.
"""

from __future__ import annotations

import functools

from ..inputs import parse_shape
from ..report.budget import METRICS
from ..runtime.errors import FlopcountError
from .grid import PLACEHOLDER, Cell

CELL_COLUMNS = ["model", "phase", "batch", "seq", "resolution", "input_shape", "dtype", "weights", "hardware", "plan"]
METRIC_COLUMNS = ([name.replace("-", "_") for name in METRICS]
                  + ["kv_cache_bytes", "latency_ms", "roofline_ms", "step_time_ms", "mfu"])
COLUMNS = ["cell"] + CELL_COLUMNS + ["layer", "type"] + METRIC_COLUMNS + ["error", "key"]
TOTAL = ""   # the ``layer`` of a cell's totals row, its last row


def run_cell(cell: Cell, options: dict, layers: int | None = None) -> list:
    """The rows of ``cell`` (every column, None where it has no value): with ``layers`` a
    depth, one per module down to it, then always the totals row (``layer`` empty), which
    marks the cell done."""
    return [{c: row.get(c) for c in COLUMNS} for row in _rows(cell, options, layers)]


def run_cells(cells: list, options: dict, layers: int | None = None) -> list:
    """[(cell, its rows)] of a chunk of cells run one after another (one task of a worker)."""
    return [(cell, run_cell(cell, options, layers)) for cell in cells]


def _rows(cell: Cell, options: dict, layers: int | None) -> list:
    base = {"cell": cell.index, **{c: _cell_value(cell, c) for c in CELL_COLUMNS}, "key": cell.key}
    try:
        if cell.phase == "forward":
            report = _forward(cell, options)
            rows = [_layer_row(base, r) for r in report.rows if 1 <= r.depth <= (layers or 0)]
            return rows + [{**base, "layer": TOTAL, "type": None, **_forward_metrics(report), "error": None}]
        metrics = _plan_metrics(cell, options) if cell.phase == "train" else _phase_metrics(cell)
        return [{**base, "layer": TOTAL, "type": None, **metrics, "error": None}]
    except Exception as exc:   # noqa: BLE001 - a failed cell is a row, never the end of the sweep
        return failed_rows(cell, error_line(exc))


def failed_rows(cell: Cell, message: str) -> list:
    """The one row of a cell that failed: its place in the grid and the error."""
    row = {"cell": cell.index, **{c: _cell_value(cell, c) for c in CELL_COLUMNS}, "layer": TOTAL, "error": message,
           "key": cell.key}
    return [{c: row.get(c) for c in COLUMNS}]


def error_line(exc: BaseException) -> str:
    """The one line a failed cell records."""
    text = " ".join(str(exc).split())
    return text if isinstance(exc, FlopcountError) else f"{type(exc).__name__}: {text}"


def _cell_value(cell: Cell, column: str):
    if column == "input_shape":
        return ";".join(_filled(cell)) or None
    return getattr(cell, column)


def _filled(cell: Cell) -> list:
    values = {"batch": cell.batch or 1, "seq": cell.seq, "resolution": cell.resolution}
    return [PLACEHOLDER.sub(lambda m: str(values[m.group(1)]), text) for text in cell.input_shape]


def _forward(cell: Cell, options: dict):
    from .. import api

    return api.profile(cell.model, input_shape=_input_shape(cell, options), batch=cell.batch, dtype=cell.dtype,
                       weights=cell.weights, hardware=cell.hardware, **options)


def _input_shape(cell: Cell, options: dict):
    """The cell's shapes: its -i templates filled in, else the model's default inputs with the
    sequence axis (dim 1 of a token or feature input) and the resolution (an image's height and
    width) set; None leaves the model's default."""
    if cell.input_shape:
        shapes = [parse_shape(text) for text in _filled(cell)]
        if all(name is not None for name, _ in shapes):
            return {name: dims for name, dims in shapes}
        return [dims for _, dims in shapes] if len(shapes) > 1 else shapes[0][1]
    if cell.seq is None and cell.resolution is None:
        return None
    specs = _default_inputs(cell.model, tuple(sorted((options.get("factory_args") or {}).items())))
    if specs is None:
        raise FlopcountError(f"{cell.model} does not say what input it takes: give --input-shape with "
                             f"{'{seq}' if cell.seq else '{resolution}'} in it (-i 1x{{seq}})")
    shapes, changed = {}, False
    for i, spec in enumerate(specs):
        dims = list(spec.shape)
        if cell.resolution is not None and len(dims) == 4:
            dims[2] = dims[3] = cell.resolution
            changed = True
        if cell.seq is not None and len(dims) in (2, 3):
            dims[1] = cell.seq
            changed = True
        shapes[spec.name if spec.name is not None else i] = tuple(dims)
    if not changed:
        axis = "a sequence (an input of rank 2 or 3)" if cell.seq is not None else "an image (an input of rank 4)"
        raise FlopcountError(f"{cell.model} has no input with {axis}: its inputs are "
                             f"{', '.join('x'.join(map(str, s.shape)) for s in specs)}; give --input-shape")
    if all(isinstance(k, str) for k in shapes):
        return shapes
    return list(shapes.values()) if len(shapes) > 1 else next(iter(shapes.values()))


@functools.lru_cache(maxsize=64)
def _default_inputs(model: str, factory_args: tuple):
    """What ``model`` takes by default (loaded once per process on meta: shapes only)."""
    from .. import loading

    target = loading.load(model, "meta", zoo_device="meta", given=[], batch=None,
                          factory_args=dict(factory_args) or None)
    return target.expected


def _forward_metrics(report) -> dict:
    values = {name.replace("-", "_"): m.read(report) for name, m in METRICS.items()}
    return {**values, "kv_cache_bytes": None, "latency_ms": report.totals.get("latency_ms"),
            "roofline_ms": report.totals.get("roofline_ms")}


def _layer_row(base: dict, row) -> dict:
    return {**base, "layer": row.name, "type": row.type, "macs": row.macs, "flops": row.flops, "params": row.params,
            "bytes_read": row.bytes_read, "bytes_written": row.bytes_written, "latency_ms": row.latency_ms,
            "roofline_ms": row.roofline_ms, "error": None}


def _phase_metrics(cell: Cell) -> dict:
    from .. import llm

    if cell.weights is not None or cell.input_shape or cell.resolution is not None:
        raise FlopcountError(f"--phase {cell.phase} takes --seq, --batch, --dtype and --hardware; not "
                             f"--weights, --input-shape or --resolution")
    phase = llm.Prefill(cell.seq) if cell.phase == "prefill" else llm.Decode(context=cell.seq)
    report = llm.profile(cell.model, phase, batch=cell.batch or 1, dtype=cell.dtype, hardware=cell.hardware)
    summary = report.to_dict()
    total, roofline = summary["total"], summary.get("roofline") or {}
    seconds = roofline.get("time_to_first_token_s" if cell.phase == "prefill" else "time_per_output_token_s")
    return {"macs": total["macs"], "flops": total["flops"], "params": report.params,
            "parameter_bytes": report.weight_bytes, "peak_memory": report.peak_memory,
            "bytes_read": total["bytes_read"], "bytes_written": total["bytes_written"],
            "kv_cache_bytes": report.kv_cache_bytes, "roofline_ms": None if seconds is None else seconds * 1e3}


def _plan_metrics(cell: Cell, options: dict) -> dict:
    """A training step on the cell's plan (:func:`flopcount.parallel.estimate`): the step's model
    FLOPs, and per GPU (its largest stage) the parameters, weight bytes and peak memory."""
    from .. import loading, parallel
    from .. import runtime as rt
    from ..runtime.nn import Module

    if cell.weights is not None:
        raise FlopcountError("--plan cells train the model: --weights formats are for inference")
    shape = _input_shape(cell, options)
    if isinstance(shape, dict) or (isinstance(shape, list) and len(shape) > 1):
        raise FlopcountError(f"a plan takes models of one input; {cell.model} has several")
    sample = tuple(shape[0] if isinstance(shape, list) else shape)[1:] if shape is not None else None
    model = cell.model
    if loading.kind_of(model) == loading.ZOO:
        model = loading.zoo_name(model)
    else:
        with rt.meta():
            model = loading.load(model, "meta", zoo_device="meta", factory_args=options.get("factory_args")).model
        if not isinstance(model, Module):
            raise FlopcountError(f"{cell.model}: a plan trains a model's parameters; give a zoo name or "
                                 f"FILE.py:FACTORY, not a model file")
    extra = {"dtype": cell.dtype} if cell.dtype is not None else {}
    plan = parallel.Plan.parse(cell.plan, global_batch=cell.batch, **extra)
    d = parallel.estimate(model, plan, input_shape=sample, hardware=cell.hardware).to_dict()
    return {"flops": d["model_flops_per_step"], "params": max(s["params"] for s in d["stages"]),
            "parameter_bytes": max(s["weights_bytes"] for s in d["stages"]),
            "peak_memory": max(s["peak_bytes"] for s in d["stages"]),
            "step_time_ms": None if d["step_time_s"] is None else d["step_time_s"] * 1e3, "mfu": d["mfu"]}
