"""Price a recorded run: module rules, functional parts, rows, op records, coverage.

Rules of attribution:
* a call of a module with a module rule costs what the rule says and covers its whole subtree
  (its children's rows are shown, marked covered, and not added again);
* a call of a module without a rule costs its children's calls plus its *functional part*: the
  ops its own ``forward`` dispatched directly. Under ``flopcount`` those are priced with the
  op's rule; under ``ptflops`` they are "seen, not counted" (priced with ptflops' op rules so
  the gap is visible), exactly as ptflops' hooks miss them;
* an op computed from constants only (no input depends on the model's inputs, parameters or
  buffers: building a causal mask, position ids) is "folded": a graph folds it at trace time,
  so neither view counts it; the report lists it;
* backward ops are attributed to the module whose forward made them and priced with the
  convention's op rules (no module rule describes a backward pass).
"""

from __future__ import annotations

from collections import Counter, defaultdict

from ..conventions.base import apply_rule
from ..report.model import COST_FIELDS, OpRecord, Row, Unsupported, accumulate
from ..runtime.registry import Cost, nbytes
from ..recording.params import parameter_counts

_ZERO = Cost()


def _shapes(specs) -> list:
    out = []
    for s in specs if isinstance(specs, tuple) else (specs,):
        if hasattr(s, "shape"):
            out.append(tuple(s.shape))
        elif isinstance(s, tuple):
            out.extend(_shapes(s))
    return out


def _spec_bytes(value) -> int:
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return nbytes(value)
    if isinstance(value, tuple):
        return sum(_spec_bytes(v) for v in value)
    if isinstance(value, dict):
        return sum(_spec_bytes(v) for v in value.values())
    return 0


class Priced:
    """The priced run: per-call costs, per-event costs, and what is covered or not counted."""

    def __init__(self, recorder, convention):
        self.rec = recorder
        self.convention = convention
        calls, events = recorder.calls, recorder.events
        self.rules = [convention.module_rule(c.module) for c in calls]
        self.covered = [False] * len(calls)
        for i, c in enumerate(calls):  # parents are recorded before their children
            p = c.parent
            self.covered[i] = p >= 0 and (self.covered[p] or self.rules[p] is not None)
        self.rule_cost = [None] * len(calls)
        for i, (c, rule) in enumerate(zip(calls, self.rules)):
            if rule is not None and c.output is not None:
                self.rule_cost[i] = apply_rule(rule, c.module, c.inputs, c.kwargs, c.output)
        # every event: its cost under the convention's op rules (None: no rule)
        self.op_cost = []
        self.own_cost = []
        for e in events:
            own = e.op.cost(e.output_spec, *e.inputs, **e.attrs) if e.op.cost else _ZERO
            self.own_cost.append(own)
            self.op_cost.append(convention.op_cost(e.op, e.output_spec, e.inputs, e.attrs, own))
        # every forward event falls in one category: "covered" (some call of its stack has a
        # module rule), "folded" (computed from constants only: a graph folds it away, so
        # neither view counts it) or "functional" (run directly by a module without a rule)
        self.kind = []
        for e in events:
            if e.phase != "forward":
                self.kind.append("backward")
            elif e.call >= 0 and (self.rules[e.call] is not None or self.covered[e.call]):
                self.kind.append("covered")
            elif e.constant:
                self.kind.append("folded")
            else:
                self.kind.append("functional")
        self.counts_functional = convention.name != "ptflops"

    def event_counted(self, i: int) -> bool:
        """Is event ``i`` part of the report's totals (directly or through a module rule)?"""
        kind = self.kind[i]
        return kind in ("covered", "backward") or (kind == "functional" and self.counts_functional)

    def _functional(self):
        for i, e in enumerate(self.rec.events):
            if self.kind[i] == "functional":
                yield i, e

    def call_values(self) -> list:
        """Forward Cost of every call: its rule, or its children's values plus its functional part."""
        calls = self.rec.calls
        values = [None] * len(calls)
        direct = defaultdict(list)
        for i, e in self._functional():
            direct[e.call].append(i)
        children = defaultdict(list)
        for i, c in enumerate(calls):
            children[c.parent].append(i)
        for i in range(len(calls) - 1, -1, -1):  # children come after their parent
            if self.rule_cost[i] is not None:
                values[i] = self.rule_cost[i]
                continue
            total = Cost()
            for child in children[i]:
                total = total + values[child]
            if self.counts_functional:
                for ev in direct[i]:
                    total = total + _macs_flops(self.op_cost[ev])
            values[i] = total
        return values

    def functional(self) -> dict:
        """Per call: the Cost of the ops its forward ran directly (uncovered, not folded),
        when the convention counts them (under ptflops they are seen, not counted)."""
        out = defaultdict(Cost)
        if not self.counts_functional:
            return out
        for i, e in self._functional():
            if e.call >= 0:
                out[e.call] = out[e.call] + _macs_flops(self.op_cost[i])
        return out

    def top_level(self) -> Cost:
        """Counted ops dispatched outside every call of the model (e.g. on its inputs)."""
        total = Cost()
        if self.counts_functional:
            for i, e in self._functional():
                if e.call < 0:
                    total = total + _macs_flops(self.op_cost[i])
        return total


def _macs_flops(cost) -> Cost:
    return _ZERO if cost is None else Cost(cost.macs, cost.flops)


def build_rows(model, priced: Priced, timings: dict | None = None, backward_timings: dict | None = None,
               modules: list | None = None) -> list:
    """One Row per module of ``model`` (tree order, root first), priced and rolled up;
    ``modules`` is ``list(model.named_modules())`` when the caller has it."""
    rec = priced.rec
    calls, events = rec.calls, rec.events
    values = priced.call_values()
    functional = priced.functional()
    modules = modules if modules is not None else list(model.named_modules())
    params = parameter_counts(model, modules)
    rows: dict = {}
    for path, module in modules:
        depth = 0 if path == "" else path.count(".") + 1
        parent = None if path == "" else path.rpartition(".")[0]
        p = params[path]
        rows[path] = Row(name=path, type=type(module).__name__, depth=depth, parent=parent,
                         params=p.total, params_own=p.own, trainable_params=p.trainable,
                         frozen_params=p.frozen)
    uncovered_seen: dict = defaultdict(bool)
    for i, c in enumerate(calls):
        row = rows[c.path]
        row.calls += 1
        if not priced.covered[i]:
            uncovered_seen[c.path] = True
        row.input_shapes = row.input_shapes or _shapes(c.inputs)
        row.output_shapes = row.output_shapes or _shapes(c.output)
        row.output_bytes += _spec_bytes(c.output)
    # a module's uncovered calls; a module only ever seen covered shows its standalone value,
    # marked covered
    for i, c in enumerate(calls):
        row = rows[c.path]
        if priced.covered[i] and uncovered_seen[c.path]:
            continue
        row.macs += values[i].macs
        row.flops += values[i].flops
        f = functional.get(i)
        if f is not None:
            row.functional_macs += f.macs
            row.functional_flops += f.flops
        row.counted_by = "covered" if priced.covered[i] else ("rule" if priced.rules[i] is not None else "ops")
        # bytes: every op in the call's range (the subtree), whatever the convention
        for ev in range(c.start, c.end):
            if events[ev].phase == "forward":
                own = priced.own_cost[ev]
                row.bytes_read += own.bytes_read
                row.bytes_written += own.bytes_written
    extra = priced.top_level()
    rows[""].macs += extra.macs
    rows[""].flops += extra.flops
    _roll_up_uncalled(rows)
    # backward: attributed to the forward module, rolled up the module tree
    for i, e in enumerate(events):
        if e.phase != "backward":
            continue
        cost = _macs_flops(priced.op_cost[i])
        path = e.path if e.path in rows else ""
        while path is not None:
            rows[path].backward_macs += cost.macs
            rows[path].backward_flops += cost.flops
            path = rows[path].parent
    if timings:
        for path, (median, minimum) in timings.items():
            if path in rows:
                rows[path].latency_ms, rows[path].latency_min_ms = median, minimum
    if backward_timings:
        for path, ms in backward_timings.items():
            if path in rows:
                rows[path].backward_latency_ms = ms
    return list(rows.values())


def _roll_up_uncalled(rows: dict) -> None:
    """A container that is never called itself (ModuleList, ModuleDict) shows the sum of its
    children, so the module tree adds up where the call tree skips a level."""
    children = defaultdict(list)
    for row in rows.values():
        if row.parent is not None:
            children[row.parent].append(row)
    for path in reversed(list(rows)):  # children after their parents in tree order
        row = rows[path]
        if row.calls or row.parent is None:
            continue
        for child in children[path]:
            if child.counted_by == "covered":
                continue
            accumulate(row, child, COST_FIELDS + ("output_bytes",))


def op_records(priced: Priced, op_latency: list | None = None, op_start: list | None = None) -> tuple:
    """(every op as an OpRecord, the seen-not-counted ones, the folded ones), in execution order."""
    records, seen, folded = [], [], []
    counters: Counter = Counter()
    for i, e in enumerate(priced.rec.events):
        cost = priced.op_cost[i]
        own = priced.own_cost[i]
        base = f"{e.path}/{e.op.name}" if e.path else e.op.name
        counters[base] += 1
        name = base if counters[base] == 1 else f"{base}_{counters[base] - 1}"
        counted = priced.event_counted(i)
        r = OpRecord(
            name=name, op=e.op.name, scope=e.path, phase=e.phase,
            macs=cost.macs if cost is not None else 0, flops=cost.flops if cost is not None else 0,
            bytes_read=own.bytes_read, bytes_written=own.bytes_written, params=e.param_elems,
            param_bytes=e.param_bytes,
            input_shapes=[None if s is None else tuple(s.shape) for s in e.inputs],
            input_dtypes=[None if s is None else s.dtype.name for s in e.inputs],
            output_shapes=[tuple(s.shape) for s in e.outputs],
            output_dtypes=[s.dtype.name for s in e.outputs],
            counted=counted,
            latency_ms=op_latency[i] if op_latency is not None else None,
            start_ms=op_start[i] if op_start is not None else None)
        records.append(r)
        if priced.kind[i] == "folded":
            folded.append(r)
        elif not counted:
            seen.append(r)
    return records, seen, folded


def unsupported(priced: Priced, module_latency: dict | None = None, total_ms: float | None = None,
                op_latency: list | None = None) -> list:
    """What the convention has no rule for, with call counts (and latency share when timed).

    Under ``flopcount``: ops with no cost rule outside every module rule. Under ``ptflops``:
    leaf modules without a rule that ran ops themselves (ptflops treats them as zero-op).
    """
    rec = priced.rec
    out = []
    if priced.counts_functional:
        calls: Counter = Counter()
        spent: dict = defaultdict(float)
        for i, e in enumerate(rec.events):
            if priced.kind[i] == "functional" and priced.op_cost[i] is None:
                calls[e.op.name] += 1
                if op_latency is not None and op_latency[i] is not None:
                    spent[e.op.name] += op_latency[i]
        whole = sum(x for x in (op_latency or []) if x is not None)
        for name, n in sorted(calls.items()):
            out.append(Unsupported("op", name, n, spent[name] / whole if op_latency and whole else None))
        return out
    direct = {e.call for i, e in priced._functional() if e.call >= 0}
    calls = Counter()
    per_call = Counter(c.path for c in rec.calls)
    spent = defaultdict(float)
    for i, c in enumerate(rec.calls):
        leaf = next(c.module.children(), None) is None
        if priced.rules[i] is None and not priced.covered[i] and i in direct and leaf:
            name = type(c.module).__name__
            calls[name] += 1
            if module_latency and c.path in module_latency:
                spent[name] += module_latency[c.path][0] / per_call[c.path]  # the path's time, per call
    for name, n in sorted(calls.items()):
        out.append(Unsupported("module", name, n, spent[name] / total_ms if total_ms and module_latency else None))
    return out
