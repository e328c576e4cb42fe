"""Where a sweep's rows go: CSV, JSON lines or Parquet, chosen by the file's extension.

Rows are appended (and flushed) as cells finish, so a sweep's memory stays flat and a killed
sweep keeps what it finished. Opening the file again resumes: the cells whose totals row is
there are done; rows of a cell cut short (layer rows without their totals, a torn last line)
are dropped. When every cell is done the file is rewritten once in grid order, so a sweep run
in pieces, on any executor, ends with the same file as one run.

Parquet cannot be appended to, so its rows go to a JSON-lines journal beside it
(``out.parquet.partial.jsonl``) and become the Parquet file at the end (pyarrow).
"""

from __future__ import annotations

import csv
import io
import json
import os

from ..io_utils import atomic_write
from .cell import COLUMNS, TOTAL
from .grid import SweepError

FORMATS = {".csv": "csv", ".jsonl": "jsonl", ".parquet": "parquet"}
JOURNAL = ".partial.jsonl"


def format_of(path: str) -> str:
    ext = os.path.splitext(path)[1].lower()
    if ext not in FORMATS:
        raise SweepError(f"{path}: a sweep writes .csv, .jsonl or .parquet files, got {ext or 'no extension'!r}")
    if FORMATS[ext] == "parquet":
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise SweepError("a .parquet output needs pyarrow: pip install pyarrow") from None
    return FORMATS[ext]


class Store:
    """An output file being filled by a sweep. ``done`` holds the keys of finished cells."""

    def __init__(self, path: str):
        self.path = os.fspath(path)
        self.format = format_of(self.path)
        self.lines_path = self.path + JOURNAL if self.format == "parquet" else self.path
        lines = self._kept_lines(with_parquet=True)
        self.done = {_key(self.format, line) for line in lines if _is_total(self.format, line)}
        self._write_lines(lines)  # torn or unfinished rows gone before anything is appended
        self._file = open(self.lines_path, "a", encoding="utf-8", newline="")

    def _kept_lines(self, with_parquet: bool = False) -> list:
        """The rows already written, of finished cells only (header excluded); a finished
        Parquet file's rows join its journal when the sweep resumes."""
        lines = []
        if with_parquet and self.format == "parquet" and os.path.exists(self.path):
            lines += [json.dumps(row) for row in _read_parquet(self.path)]
        if os.path.exists(self.lines_path):
            with open(self.lines_path, encoding="utf-8", newline="") as f:
                text = f.read()
            if not text.endswith("\n"):
                text = text[: text.rfind("\n") + 1]   # a line torn by a kill
            body = text.splitlines(keepends=True)
            if self.format == "csv" and body:
                if body[0].rstrip("\r\n") != ",".join(COLUMNS):
                    raise SweepError(f"{self.path}: not a sweep's CSV (its header differs); write to a new file")
                body = body[1:]
            lines += body
        lines = [line if line.endswith("\n") else line + "\n" for line in lines]
        finished = {_key(self.format, line) for line in lines if _is_total(self.format, line)}
        return [line for line in lines if _key(self.format, line) in finished]

    def _write_lines(self, lines: list) -> None:
        header = [",".join(COLUMNS) + "\n"] if self.format == "csv" else []
        atomic_write(self.lines_path, "".join(header + lines))

    def append(self, rows: list) -> None:
        """The rows of one cell, its totals row last, flushed at once."""
        self._file.write("".join(_line(self.format, row) for row in rows))
        self._file.flush()

    def finish(self, order: list) -> None:
        """Rewrite the file in the order of ``order`` (cell keys); rows of other cells (an
        earlier sweep's) follow in their order. Parquet: the journal becomes the file."""
        self._file.close()
        lines = self._kept_lines()
        rank = {key: i for i, key in enumerate(order)}
        lines.sort(key=lambda line: rank.get(_key(self.format, line), len(rank)))
        if self.format != "parquet":
            self._write_lines(lines)
            return
        _write_parquet(self.path, [json.loads(line) for line in lines])
        os.remove(self.lines_path)

    def close(self) -> None:
        if not self._file.closed:
            self._file.close()


def _line(fmt: str, row: dict) -> str:
    values = [row.get(c) for c in COLUMNS]
    if fmt == "csv":
        buffer = io.StringIO()
        csv.writer(buffer, lineterminator="\n").writerow(["" if v is None else v for v in values])
        return buffer.getvalue()
    return json.dumps(dict(zip(COLUMNS, values))) + "\n"


def _fields(fmt: str, line: str) -> dict:
    if fmt == "csv":
        return dict(zip(COLUMNS, next(csv.reader([line]))))
    try:
        return json.loads(line)
    except json.JSONDecodeError:
        return {}


def _key(fmt: str, line: str) -> str | None:
    return _fields(fmt, line).get("key")


def _is_total(fmt: str, line: str) -> bool:
    return _fields(fmt, line).get("layer") in (TOTAL, None) and _key(fmt, line) is not None


_ARROW_TYPES = {"cell": "int64", "batch": "int64", "seq": "int64", "resolution": "int64", "macs": "int64",
                "flops": "int64", "params": "int64", "parameter_bytes": "int64", "peak_memory": "int64",
                "peak_activations": "int64", "bytes_read": "int64", "bytes_written": "int64",
                "kv_cache_bytes": "int64", "latency_ms": "float64", "roofline_ms": "float64",
                "step_time_ms": "float64", "mfu": "float64"}

INT_COLUMNS = [c for c, kind in _ARROW_TYPES.items() if kind == "int64"]


def _schema():
    import pyarrow as pa

    return pa.schema([(c, getattr(pa, _ARROW_TYPES.get(c, "string"))()) for c in COLUMNS])


def _write_parquet(path: str, rows: list) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pylist([{c: row.get(c) for c in COLUMNS} for row in rows], schema=_schema())
    buffer = pa.BufferOutputStream()
    pq.write_table(table, buffer)
    atomic_write(path, buffer.getvalue().to_pybytes())


def _read_parquet(path: str) -> list:
    import pyarrow.parquet as pq

    try:
        return pq.read_table(path).to_pylist()
    except Exception as exc:  # noqa: BLE001 - pyarrow's errors have no common base
        raise SweepError(f"{path}: not a readable Parquet file ({' '.join(str(exc).split())})") from None


def read_rows(path: str) -> list:
    """A finished sweep file's rows as dicts of typed values (None where a CSV cell is empty)."""
    fmt = format_of(path)
    if fmt == "parquet":
        return _read_parquet(path)
    with open(path, encoding="utf-8", newline="") as f:
        if fmt == "jsonl":
            return [json.loads(line) for line in f if line.strip()]
        return [{c: _typed(c, v) for c, v in row.items()} for row in csv.DictReader(f)]


def _typed(column: str, text: str):
    if text == "":
        return None
    kind = _ARROW_TYPES.get(column)
    return int(text) if kind == "int64" else float(text) if kind == "float64" else text
