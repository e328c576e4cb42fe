"""The report model: rows (modules, scopes, ops), per-op records, totals and context.

A ``Report`` is what both counters produce. The eager view fills one row per module; the graph
view one row per node plus a row per module scope (dotted prefixes) that sums its nodes. Either
way every row has ``name``, ``type``, ``depth``, ``parent``, ``macs``, ``flops``, ``params`` and
``latency_ms``; totals are the root row's values.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field, fields
from typing import Literal

from .shared import no_macs


def plain(value):
    """``value`` as JSON's types: tuples as lists, keys as strings, anything else (a dtype, a
    slice, an array) as its text. An op's attrs are mostly ints, lists and strings already.

    >>> plain({"kernel_size": (3, 3), "dim": -1, "slice": slice(0, 2)})
    {'kernel_size': [3, 3], 'dim': -1, 'slice': 'slice(0, 2, None)'}
    """
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)  # JSON has no inf or nan
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if hasattr(value, "item") and getattr(value, "ndim", None) == 0:
        return plain(value.item())   # a numpy scalar
    return str(value)


def _fields_with_listed_shapes(record) -> dict:
    """A Row's or OpRecord's fields as a dict, its shapes as lists (for JSON)."""
    out = {f.name: getattr(record, f.name) for f in fields(record)}
    # None stands for an absent optional input (a conv without bias)
    out["input_shapes"] = [None if s is None else list(s) for s in record.input_shapes]
    out["output_shapes"] = [list(s) for s in record.output_shapes]
    return out


class Achieved:
    """Rates achieved over a measured time, and the arithmetic intensity, for anything with
    ``flops``, ``bytes_read``, ``bytes_written`` and ``latency_ms`` (a report row, an op record,
    an engine's timed node)."""

    __slots__ = ()  # rows keep theirs: a huge graph has one per node and scope
    flops: int
    bytes_read: int
    bytes_written: int
    latency_ms: float | None

    @property
    def flops_per_second(self) -> float | None:
        """Achieved FLOP/s from the measured latency."""
        return self.flops / (self.latency_ms / 1e3) if self.latency_ms else None

    @property
    def bytes_per_second(self) -> float | None:
        """Achieved bytes/s (read + written) from the measured latency."""
        moved = self.bytes_read + self.bytes_written
        return moved / (self.latency_ms / 1e3) if self.latency_ms else None

    @property
    def intensity(self) -> float | None:
        """Arithmetic intensity: FLOPs per byte moved (``None`` when nothing moved)."""
        moved = self.bytes_read + self.bytes_written
        return self.flops / moved if moved else None


RowKind = Literal["module", "scope", "op"]
CountedBy = Literal["rule", "ops", "covered", "unsupported"]
Bound = Literal["compute", "memory"]


@dataclass(slots=True)
class Row(Achieved):
    """One line of a report: a module, a module scope or one op (graph node).

    ``macs``/``flops`` are forward counts of the whole subtree under the report's convention;
    ``macs_by_dtype`` splits ``macs`` by the dtype they run in (``{"float32": ..., "int8": ...}``:
    see COUNTING.md, "MACs by dtype"; a row without MACs shares one read-only empty mapping, which
    :func:`~flopcount.report.sums.add_macs` replaces by the row's own dict on its first MACs);
    ``backward_*`` are the same for the backward pass; ``latency_ms`` is the median measured
    time (``None`` when not timed); ``params`` counts each parameter of the subtree once.
    ``input_shapes`` and ``output_shapes`` are tuples of shape tuples; the rows of one report
    share one tuple per distinct value (a huge graph repeats a few shapes on every node).
    """

    name: str
    type: str
    depth: int = 0
    parent: str | None = None
    kind: RowKind = "module"        # "module" (eager), "scope" (graph roll-up) or "op" (graph node)
    macs: int = 0
    flops: int = 0
    macs_by_dtype: dict = field(default_factory=no_macs)  # dtype name -> forward MACs run in it
    params: int = 0
    params_own: int = 0
    trainable_params: int = 0
    frozen_params: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    output_bytes: int = 0
    calls: int = 0
    latency_ms: float | None = None
    latency_min_ms: float | None = None
    backward_macs: int = 0
    backward_flops: int = 0
    backward_latency_ms: float | None = None
    functional_macs: int = 0        # eager: ops run directly in this module's forward
    functional_flops: int = 0
    counted_by: CountedBy = "ops"   # "rule" (module rule), "ops", "covered" (inside a ruled parent),
                                    # "unsupported" (an op with no rule in the convention: 0)
    input_shapes: tuple = ()        # a shape tuple per input (None: an absent optional input)
    output_shapes: tuple = ()
    roofline_ms: float | None = None  # with a hardware profile: the sum of its ops' rooflines
    predicted_ms: float | None = None  # with a calibrated profile: the sum of its ops' predicted times
    bound: Bound | None = None        # "compute" or "memory": the kind of op most of it waits on

    @property
    def roofline_fraction(self) -> float | None:
        """The roofline time as a fraction of the measured latency (1.0: at the bound)."""
        return self.roofline_ms / self.latency_ms if self.roofline_ms is not None and self.latency_ms else None

    def to_dict(self) -> dict:
        out = _fields_with_listed_shapes(self)
        out["intensity"] = self.intensity
        out["flops_per_second"] = self.flops_per_second
        out["roofline_fraction"] = self.roofline_fraction
        return out


@dataclass(slots=True)
class OpRecord(Achieved):
    """One dispatched op (eager) or graph node: the per-op view and the Chrome trace.

    ``counted`` says whether the op's cost is part of the report's total (an op inside a module
    with a module rule is covered by that rule; under ``ptflops`` eager, functional ops are seen
    but not counted). A graph node's record also names the values it reads and makes
    (``inputs``, ``outputs``: the graph's value names, None for an absent optional input), so
    the records are the op graph itself, and its ``attrs``; an eager op's have none.
    """

    name: str
    op: str
    scope: str
    phase: str = "forward"
    macs: int = 0
    flops: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    params: int = 0                 # parameter elements the op reads
    param_bytes: int = 0
    input_shapes: tuple = ()        # as a Row's: tuples, shared between the records of a graph
    input_dtypes: tuple = ()
    output_shapes: tuple = ()
    output_dtypes: tuple = ()
    counted: bool = True
    latency_ms: float | None = None
    start_ms: float | None = None   # offset from the start of the timed run (for the trace)
    source: str = ""                # the model file's node name (ONNX), when the graph came from one
    roofline_ms: float | None = None  # with a hardware profile: max(compute, memory) time
    predicted_ms: float | None = None  # with a calibrated profile: its class's measured curve, read here
    bound: Bound | None = None        # "compute" or "memory"
    mac_dtype: str | None = None      # the dtype its MACs run in (None: no MACs)
    inputs: tuple = ()                # graph nodes: the value names read (None: an absent input)
    outputs: tuple = ()               # graph nodes: the value names made
    attrs: dict | None = None         # graph nodes: the op's attributes, the node's own dict
    library: str | None = None        # on a GPU (eager, or graph when timed): the path its kernel took ("cuBLAS", ...)

    @property
    def output_bytes(self) -> int:
        return self.bytes_written

    @property
    def roofline_fraction(self) -> float | None:
        """The roofline time as a fraction of the measured latency (1.0: at the bound)."""
        return self.roofline_ms / self.latency_ms if self.roofline_ms is not None and self.latency_ms else None

    def to_dict(self) -> dict:
        out = _fields_with_listed_shapes(self)
        out["inputs"], out["outputs"] = list(self.inputs), list(self.outputs)
        out["attrs"] = plain(self.attrs or {})
        out["roofline_fraction"] = self.roofline_fraction
        if self.library is None:  # only GPU runs have one: CPU reports keep their fields
            del out["library"]
        return out


@dataclass
class Unsupported:
    """A module type or op with no rule in the report's convention, and how often it ran."""

    kind: str       # "module" or "op"
    name: str
    calls: int
    latency_share: float | None = None
    nodes: list = field(default_factory=list)  # the graph nodes' names, when they come from a file

    def __str__(self) -> str:
        share = "" if self.latency_share is None else f", {100 * self.latency_share:.1f}% of latency"
        shown = ", ".join(repr(n) for n in self.nodes[:5]) + (", ..." if len(self.nodes) > 5 else "")
        where = f": {shown}" if self.nodes else ""
        return f"{self.kind} {self.name} ({self.calls} call{'s' if self.calls != 1 else ''}{where}{share})"


@dataclass
class Memory:
    """Memory in bytes: parameters and buffers by dtype, activation peaks predicted and measured."""

    parameters: dict = field(default_factory=dict)   # dtype name -> bytes
    buffers: dict = field(default_factory=dict)
    activations: int = 0                             # bytes of every op output, summed
    predicted_peak: int | None = None                # activations alive at once (liveness)
    measured_peak: int | None = None                 # the backend's tracker: kernel temporaries too
    measured_activation_peak: int | None = None      # most bytes held between two ops, same run
    training_predicted_peak: int | None = None       # what autograd keeps for backward
    training_measured_peak: int | None = None
    training_measured_activation_peak: int | None = None

    @property
    def parameter_bytes(self) -> int:
        return sum(self.parameters.values())

    @property
    def buffer_bytes(self) -> int:
        return sum(self.buffers.values())

    def to_dict(self) -> dict:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["parameter_bytes"] = self.parameter_bytes
        out["buffer_bytes"] = self.buffer_bytes
        return out


class _OpLists:
    """A report's (ops, seen_not_counted, folded), built by ``make`` on the first read of any of
    them, once for a report and the copies that share its records."""

    __slots__ = ("make", "built")

    def __init__(self, make):
        self.make, self.built = make, None

    def __call__(self) -> tuple:
        if self.built is None:
            self.built, self.make = tuple(list(records) for records in self.make()), None
        return self.built


def _own_records(lists: tuple) -> tuple:
    """Copies of the records in ``lists``; a record in two lists stays one record."""
    copies: dict = {}

    def own(record):
        if id(record) not in copies:
            copies[id(record)] = copy.copy(record)
        return copies[id(record)]

    return tuple([own(r) for r in records] for records in lists)


class Report:
    """What a model costs: rows, per-op records, totals, convention and context.

    >>> import flopcount
    >>> report = flopcount.profile("resnet18", input_shape=(1, 3, 224, 224))   # doctest: +SKIP
    >>> report.macs, report.params                                               # doctest: +SKIP
    (1814073344, 11689512)
    >>> print(report.table(depth=2, sort="macs"))                                # doctest: +SKIP

    Attributes: ``rows`` (list of :class:`Row`, tree order, root first), ``ops`` (list of
    :class:`OpRecord`), ``totals`` (dict), ``convention``, ``mode``, ``device``, ``dtype``,
    ``input_shapes``, ``engine`` (who ran the model for its latency: ``flopcount``'s runtime, or
    ``torch`` timing the user's PyTorch model), ``unsupported`` (list of :class:`Unsupported`), ``seen_not_counted``
    (ops observed but outside the convention's total), ``notes`` (remarks on how the model was
    loaded or captured), ``folded`` (eager: ops computed from
    constants only, which a graph folds away; in no total), ``memory`` (:class:`Memory`),
    ``latency_ms`` (whole forward, median, timed without per-module or per-op
    synchronization; a row's ``latency_ms`` comes from the per-module or per-node runs, so the
    root row's differs by that synchronization), ``backward``.
    """

    def __init__(self, rows: list, *, convention: str, mode: str, device: str, dtype: str = "",
                 input_shapes: list | None = None, ops: list | None = None,
                 unsupported: list | None = None, seen_not_counted: list | None = None,
                 folded: list | None = None, memory: Memory | None = None, latency_ms: float | None = None,
                 latency_min_ms: float | None = None, backward: bool = False,
                 backward_latency_ms: float | None = None, model: str = "", op_lists=None,
                 notes: list | None = None, engine: str = "flopcount"):
        self.rows = list(rows)
        # op_lists: a function giving (ops, seen_not_counted, folded), called on first use of
        # any of them, so a profile whose op lists nobody reads does not build them; ``ops``
        # alone may be such a function too (the graph view's records, one per node)
        self._lists = _OpLists(op_lists or (lambda: (ops() if callable(ops) else ops or [], seen_not_counted or [],
                                                     folded or [])))
        self.convention = convention
        self.mode = mode
        self.device = str(device)
        self.dtype = dtype
        self.input_shapes = [tuple(s) for s in (input_shapes or [])]
        self.unsupported = list(unsupported or [])
        self.memory = memory or Memory()
        self.latency_ms = latency_ms
        self.latency_min_ms = latency_min_ms
        self.backward = backward
        self.backward_latency_ms = backward_latency_ms
        self.model = model
        self.hardware = None  # the hardware Profile the rooflines were priced on (report/roofline.py)
        self.notes = list(notes or [])   # remarks on how the model was loaded (a capture's fallback...)
        self.engine = engine             # who ran the model for its latency: "flopcount", "torch", "onnxruntime"
        self.engine_nodes: list = []     # engine "onnxruntime": its nodes, timed and joined with counts
        self.threads = None              # a timed CPU run: its runtime.threads.ThreadChoice
        # the rows by name and by parent, made when first asked for (a table needs only the second)
        self._by_name: dict | None = None
        self._children: dict | None = None

    # --- the op lists, built when first read --------------------------------------------
    @property
    def ops(self) -> list:
        return self._lists()[0]

    @property
    def seen_not_counted(self) -> list:
        return self._lists()[1]

    @property
    def folded(self) -> list:
        return self._lists()[2]

    # --- the numbers ----------------------------------------------------------------------
    @property
    def root(self) -> Row:
        return self.rows[0]

    @property
    def macs(self) -> int:
        """Forward MACs of the whole model under the report's convention."""
        return self.root.macs

    @property
    def flops(self) -> int:
        """Forward FLOPs of the whole model under the report's convention."""
        return self.root.flops

    @property
    def params(self) -> int:
        """Every parameter once (trainable and frozen)."""
        return self.root.params

    @property
    def totals(self) -> dict:
        """Whole-model numbers: macs, flops, params (trainable/frozen), bytes, latency, backward."""
        r = self.root
        out = {
            "macs": r.macs, "flops": r.flops, "macs_by_dtype": dict(r.macs_by_dtype), "params": r.params,
            "trainable_params": r.trainable_params, "frozen_params": r.frozen_params,
            "bytes_read": r.bytes_read, "bytes_written": r.bytes_written,
            "latency_ms": self.latency_ms, "latency_min_ms": self.latency_min_ms,
            "seen_not_counted_macs": sum(o.macs for o in self.seen_not_counted),
            "seen_not_counted_flops": sum(o.flops for o in self.seen_not_counted),
        }
        if self.hardware is not None:
            # what the device must hold for a forward: the model's state and the activation peak
            m = self.memory
            needed = m.parameter_bytes + m.buffer_bytes + (m.predicted_peak or 0)
            out.update(roofline_ms=r.roofline_ms, roofline_bound=r.bound,
                       roofline_fraction=(r.roofline_ms / self.latency_ms if self.latency_ms else None),
                       predicted_ms=r.predicted_ms,
                       predicted_error=(r.predicted_ms / self.latency_ms - 1
                                        if r.predicted_ms is not None and self.latency_ms else None),
                       memory_needed_bytes=needed, fits_memory=needed <= self.hardware.memory_bytes)
        if self.backward:
            out.update(backward_macs=r.backward_macs, backward_flops=r.backward_flops,
                       backward_latency_ms=self.backward_latency_ms,
                       training_macs=r.macs + r.backward_macs, training_flops=r.flops + r.backward_flops)
        return out

    @property
    def warnings(self) -> list:
        """Things a reader of the numbers should know: timings that spread widely (a loaded
        machine), forward counts changed by training mode. Shown under every table."""
        from .warnings import report_warnings

        return report_warnings(self)

    # --- navigation -----------------------------------------------------------------------
    def row(self, name: str) -> Row:
        """The row called ``name`` (a dotted module path, '' for the model itself)."""
        try:
            return self._rows_by_name()[name]
        except KeyError:
            raise KeyError(f"no row named {name!r} in the report") from None

    def __contains__(self, name: str) -> bool:
        return name in self._rows_by_name()

    def children(self, name: str) -> list:
        if self._children is None:
            self._children = {}
            for r in self.rows:
                if r.parent is not None:
                    self._children.setdefault(r.parent, []).append(r)
        return list(self._children.get(name, []))

    def _rows_by_name(self) -> dict:
        if self._by_name is None:
            self._by_name = {r.name: r for r in self.rows}
        return self._by_name

    def __repr__(self) -> str:
        from .units import flops_to_string, macs_to_string, params_to_string

        return (f"<Report {self.model or self.root.type} [{self.mode}, {self.convention}] "
                f"{macs_to_string(self.macs)}, {flops_to_string(self.flops)}, "
                f"{params_to_string(self.params)} params>")

    # --- views and renderers (each in its own module) -------------------------------------
    def by_op_type(self, phase: str | None = "forward") -> list:
        """One summary row per op type (fvcore's ``by_operator``), most MACs/FLOPs first."""
        from .views import by_op_type

        return by_op_type(self, phase)

    def by_op(self, phase: str | None = None) -> list:
        """Every op record (optionally of one phase), in execution order."""
        return [o for o in self.ops if phase is None or o.phase == phase]

    def table(self, depth: int | None = None, top: int | None = None, sort: str | None = None,
              by: str = "module", width: int | None = None) -> str:
        """A rich tree table as text (depth limit, top-k, sort key, share % columns)."""
        from .table import rich_table_text

        return rich_table_text(self, depth=depth, top=top, sort=sort, by=by, width=width)

    def __rich_console__(self, console, options):
        """``Console(width=...).print(report)``: the tree table at the console's width."""
        from .table import rich_table

        yield rich_table(self, width=options.max_width)

    def print(self, depth: int | None = None, top: int | None = None, sort: str | None = None,
              by: str = "module", file=None) -> None:
        """Print the rich tree table (to ``file``, default the terminal)."""
        from .table import print_rich_table

        print_rich_table(self, depth=depth, top=top, sort=sort, by=by, file=file)

    def tabulate(self, fmt: str = "github", depth: int | None = None, top: int | None = None,
                 sort: str | None = None, by: str = "module") -> str:
        """A plain-text table: ``fmt`` is plain, github, grid or markdown."""
        from .table import tabulate_text

        return tabulate_text(self, fmt=fmt, depth=depth, top=top, sort=sort, by=by)

    def markdown(self, **kwargs) -> str:
        return self.tabulate("markdown", **kwargs)

    def to_dict(self) -> dict:
        from .export import to_dict

        return to_dict(self)

    def to_json(self, indent: int | None = 2) -> str:
        """JSON with the schema documented in :mod:`flopcount.report.export`."""
        from .export import to_json

        return to_json(self, indent=indent)

    def to_csv(self, by: str = "module") -> str:
        """CSV: a header, then one line per row (``by="op"``: per op record)."""
        from .export import to_csv

        return to_csv(self, by=by)

    def with_hardware(self, hardware) -> "Report":
        """A copy with every forward op priced on ``hardware`` (a profile or its name:
        ``"h100-sxm"``): each op's and each row's roofline time and bound, and the totals. This
        report stays as it was.

        >>> import flopcount
        >>> report = flopcount.profile("resnet18").with_hardware("a100-80gb")   # doctest: +SKIP
        >>> report.totals["roofline_ms"], report.root.bound                      # doctest: +SKIP
        """
        from .roofline import add_roofline

        priced = self.copy()
        add_roofline(priced, hardware)
        return priced

    def with_(self, **changes) -> "Report":
        """A copy with some attributes replaced (``notes``, ``threads``...). Rows and op records
        are shared: no report changes them once built (:meth:`copy` gives a report its own).

        >>> import flopcount, flopcount.runtime as rt
        >>> report = flopcount.profile(rt.nn.Linear(3, 2), rt.ones(4, 3))
        >>> report.with_(notes=["checked"]).notes, report.notes
        (['checked'], [])
        """
        unknown = sorted(set(changes) - set(vars(self)))
        if unknown:
            raise AttributeError(f"Report has no attribute {unknown[0]!r} to replace")
        new = copy.copy(self)
        new.__dict__.update(changes)
        if "rows" in changes:  # the rows by name and by parent are those of the rows given
            new._by_name = new._children = None
        return new

    def copy(self) -> "Report":
        """A copy with rows, op records and lists of its own: what an annotation (rooflines, an
        engine's measured times) fills in before returning it, leaving this report as it was."""
        new = self.with_(rows=[copy.copy(r) for r in self.rows], notes=list(self.notes),
                         unsupported=list(self.unsupported), engine_nodes=list(self.engine_nodes),
                         memory=copy.copy(self.memory))
        new._lists = _OpLists(lambda: _own_records(self._lists()))
        return new

    def plot(self, kind: str = "overview", depth: int = 1, top: int | None = None, hardware=None,
             path: str | None = None):
        """A matplotlib Figure: per-layer bars of MACs, params and latency (``kind="layers"``),
        a roofline chart of every op (``"roofline"``), or both (``"overview"``); also written
        to ``path`` (.svg, .png, .pdf) when given. Needs matplotlib.

        >>> import flopcount
        >>> flopcount.profile("resnet18").plot(path="resnet18.svg")   # doctest: +SKIP
        <Figure size 1100x1000 with 4 Axes>
        """
        from .plot import plot

        return plot(self, kind=kind, depth=depth, top=top, hardware=hardware, path=path)

    def diff(self, other: "Report", by: str = "layer"):
        """``other`` against this report, row by row: added, removed and changed layers
        (``by="layer"``) or ops (``by="op"``), with the change in MACs, params, bytes, latency.

        >>> import flopcount
        >>> a = flopcount.profile("resnet18")                                          # doctest: +SKIP
        >>> d = a.diff(flopcount.profile("resnet18", input_shape=(1, 3, 160, 160)))    # doctest: +SKIP
        >>> d.count("changed"), d.totals["macs"]                                        # doctest: +SKIP
        """
        from .diff import diff

        return diff(self, other, by=by)

    def chrome_trace(self) -> dict:
        """Per-op events in Chrome trace format, with onnxruntime's profiler field names."""
        from .trace import chrome_trace

        return chrome_trace(self)

    def to_html(self, path=None, timeline: bool | None = None) -> str:
        """The report as one self-contained page (module tree, op graph, roofline, timeline:
        :mod:`flopcount.report.page`), written atomically to ``path`` when given; returns its text.
        ``timeline``: None draws one when the report was timed, True insists (an error without
        measured times), False leaves it out.

        >>> import flopcount
        >>> flopcount.profile("resnet18").to_html("resnet18.html")     # doctest: +SKIP
        """
        from .page import report_page, write_page

        text = report_page(self, timeline=timeline)
        if path is not None:
            write_page(text, path)
        return text

    def _repr_html_(self) -> str:
        """A notebook's rich display: the page of :meth:`to_html` in an iframe."""
        from .page import iframe

        return iframe(self.to_html())
