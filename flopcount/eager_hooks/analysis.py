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

from ..conventions.base import takes_kwargs
from ..hardware import compute_dtype
from ..recording import pricing
from ..recording.rows import NodeRows
from ..report.model import Unsupported
from ..report.shared import no_macs
from ..report.sums import accumulate, add_macs, add_macs_of, add_macs_to
from ..runtime.registry import Spec, nbytes


def _shapes(specs) -> list:
    if type(specs) is Spec:  # a module's one output, most of the time
        return [tuple(specs.shape)]
    out = []
    for s in specs if isinstance(specs, tuple) else (specs,):
        if isinstance(s, Spec) or hasattr(s, "shape"):  # a Spec first: most values are
            out.append(tuple(s.shape))
        elif isinstance(s, tuple):
            out.extend(_shapes(s))
    return out


def _spec_bytes(value) -> int:
    if isinstance(value, Spec) or (hasattr(value, "shape") and hasattr(value, "dtype")):
        return nbytes(value)
    if isinstance(value, tuple):
        return sum(_spec_bytes(v) for v in value)
    if isinstance(value, dict):
        return sum(_spec_bytes(v) for v in value.values())
    return 0


def _dtypes(specs) -> list:
    """The dtypes of the tensors in (nested) input specs."""
    if isinstance(specs, (tuple, list)):
        return [d for s in specs for d in _dtypes(s)]
    if isinstance(specs, dict):
        return [d for s in specs.values() for d in _dtypes(s)]
    return [specs.dtype] if isinstance(specs, Spec) or hasattr(specs, "dtype") else []


def mac_dtype(input_specs) -> str:
    """The dtype MACs on these inputs run in: their compute dtype (the widest floating one)."""
    return compute_dtype(_dtypes(input_specs)).name


class Priced:
    """The priced run: per-call costs, per-event costs, and what is covered or not counted.

    Everything is priced in a few passes over flat lists (one per field), not per call: the
    module rules of the calls, every event's own cost and its cost under the convention, and,
    where module rules apply (:meth:`sum_calls`), the forward MACs and FLOPs of every call
    summed bottom-up.
    """

    def __init__(self, recorder, convention):
        self.rec = recorder
        self.convention = convention
        calls, events = recorder.calls, recorder.events
        self.rules = rules = convention.module_rules([c.module for c in calls])
        self.covered = covered = [False] * len(calls)
        for i, c in enumerate(calls):  # parents are recorded before their children
            p = c.parent
            covered[i] = p >= 0 and (covered[p] or rules[p] is not None)
        self.rule_cost = rule_cost = []
        with_kwargs: dict = {}  # id(rule) -> does it take the call's keyword arguments (looked up once)
        for c, rule in zip(calls, rules):
            if rule is None or c.output is None:
                rule_cost.append(None)
                continue
            kw = with_kwargs.get(id(rule))
            if kw is None:
                kw = with_kwargs[id(rule)] = takes_kwargs(rule)
            rule_cost.append(rule(c.module, c.inputs, c.output, c.kwargs) if kw else rule(c.module, c.inputs, c.output))
        # every event: its cost under the convention's op rules (None: no rule) and its own cost
        # (bytes always come from it)
        self.op_cost, self.own_cost = pricing.price(events, convention)
        # every forward event falls in one category: "covered" (some call of its stack has a
        # module rule), "folded" (computed from constants only: a graph folds it away, so
        # neither view counts it) or "functional" (run directly by a module without a rule)
        self.kind = kind = []
        for e in events:
            if e.phase != "forward":
                kind.append("backward")
            elif e.call >= 0 and (rules[e.call] is not None or covered[e.call]):
                kind.append("covered")
            elif e.constant:
                kind.append("folded")
            else:
                kind.append("functional")
        self.counts_functional = convention.counts_functional

    def sum_calls(self) -> None:
        """MACs and FLOPs per call: its functional part, and its value (its rule, or its
        children's values plus its functional part), bottom-up in one pass."""
        calls = self.rec.calls
        n = len(calls)
        self.functional_macs, self.functional_flops = f_macs, f_flops = [0] * n, [0] * n
        f_by = [{} for _ in range(n)]  # MACs by the dtype they run in (COUNTING.md)
        top_macs = top_flops = 0
        self.top_by_dtype = top_by = {}
        if self.counts_functional:
            for i, e in self._own_ops():
                cost = self.op_cost[i]
                macs, flops = (0, 0) if cost is None else (cost.macs, cost.flops)
                c = e.call
                if c >= 0:
                    f_macs[c] += macs
                    f_flops[c] += flops
                    add_macs(f_by[c], mac_dtype(e.inputs) if macs else None, macs)
                else:
                    top_macs += macs
                    top_flops += flops
                    add_macs(top_by, mac_dtype(e.inputs) if macs else None, macs)
        self.top_macs, self.top_flops = top_macs, top_flops
        # children come after their parent: going backwards, a call's children are done
        # when it is reached
        self.value_macs, self.value_flops = v_macs, v_flops = list(f_macs), list(f_flops)
        self.value_by_dtype = v_by = f_by
        for i in range(n - 1, -1, -1):
            rule = self.rule_cost[i]
            if rule is not None:
                v_macs[i], v_flops[i] = rule.macs, rule.flops
                v_by[i] = {}
                add_macs(v_by[i], mac_dtype(calls[i].inputs) if rule.macs else None, rule.macs)
            p = calls[i].parent
            if p >= 0:
                v_macs[p] += v_macs[i]
                v_flops[p] += v_flops[i]
                for dtype, macs in v_by[i].items():
                    add_macs(v_by[p], dtype, macs)

    def _functional(self):
        for i, e in enumerate(self.rec.events):
            if self.kind[i] == "functional":
                yield i, e

    def _own_ops(self):
        """The functional ops, and those a covered module without a rule ran itself: such a
        module is shown with its own value (its ops), not added to its ruled ancestor's."""
        rules = self.rules
        for i, e in enumerate(self.rec.events):
            kind = self.kind[i]
            if kind == "functional" or (kind == "covered" and not e.constant and rules[e.call] is None):
                yield i, e


def build_rows(model, priced: Priced, graph, timings: dict | None = None,
               backward_timings: dict | None = None, modules: list | None = None) -> list:
    """One Row per module of ``model``, made from the run's captured ``graph`` by the graph
    view's own pipeline (``recording/rows.py``: a module's row sums the ops run under its path),
    then given what only the run's calls know: how often each module was called, the shapes of
    its first call and the bytes its calls returned (a dropout in eval mode makes no value, yet
    returns one), module rules where the convention has them, the backward ops, and the measured
    times. The rows are in the model's module order (``modules``: ``list(model.named_modules())``
    when the caller has it), as its hooks see them, not in the order their ops ran."""
    rec = priced.rec
    kept = [i for i, e in enumerate(rec.events) if e.phase == "forward" and not e.constant]
    node_rows = NodeRows(graph, priced.convention, model,
                         ([priced.op_cost[i] for i in kept], [priced.own_cost[i] for i in kept]))
    rows: dict = {}
    own_ops = []
    for row in node_rows.rows():
        if row.kind == "op":
            own_ops.append(row)
        else:
            row.kind, row.calls = "module", 0
            rows[row.name] = row
    if priced.counts_functional:
        for op in own_ops:
            parent = rows[op.parent]
            parent.functional_macs += op.macs
            parent.functional_flops += op.flops
    for c in rec.calls:
        row = rows[c.path]
        if not row.calls:  # what its calls took and gave, not the values its ops made
            row.input_shapes, row.output_shapes = tuple(_shapes(c.inputs)), tuple(_shapes(c.output))
            row.output_bytes = 0
        row.calls += 1
        row.output_bytes += _spec_bytes(c.output)
    # a module costs the ops it ran, unless the convention prices modules (rules) or leaves
    # the ops run directly in a forward uncounted (ptflops' hooks never see them)
    if not priced.counts_functional or any(rule is not None for rule in priced.rules):
        _apply_module_rules(rows, priced)
    # backward: attributed to the forward module, rolled up the module tree
    for i, e in enumerate(rec.events):
        if e.phase != "backward":
            continue
        cost = pricing.macs_flops(priced.op_cost[i])
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
    modules = modules if modules is not None else list(model.named_modules())
    return [rows[path] for path, _ in modules]


def _apply_module_rules(rows: dict, priced: Priced) -> None:
    """Module rules over the module rows: a ruled call costs what its rule says and covers its
    subtree; a module's row sums its uncovered calls' values (a module only ever seen covered
    shows its standalone value, marked covered); a container never called itself (ModuleList)
    sums its children, so the module tree adds up where the call tree skips a level."""
    priced.sum_calls()
    calls, covered, rules = priced.rec.calls, priced.covered, priced.rules
    uncovered_seen = {c.path for i, c in enumerate(calls) if not covered[i]}
    for row in rows.values():
        row.macs = row.flops = row.functional_macs = row.functional_flops = 0
        row.macs_by_dtype = no_macs()
    for i, c in enumerate(calls):
        row = rows[c.path]
        if covered[i] and c.path in uncovered_seen:
            continue
        row.macs += priced.value_macs[i]
        row.flops += priced.value_flops[i]
        for dtype, macs in priced.value_by_dtype[i].items():
            add_macs_to(row, dtype, macs)
        row.functional_macs += priced.functional_macs[i]
        row.functional_flops += priced.functional_flops[i]
        row.counted_by = "covered" if covered[i] else ("rule" if rules[i] is not None else "ops")
    root = rows[""]
    root.macs += priced.top_macs
    root.flops += priced.top_flops
    for dtype, macs in priced.top_by_dtype.items():
        add_macs_to(root, dtype, macs)
    uncalled = [path for path, row in rows.items() if not row.calls and row.parent is not None]
    children = defaultdict(list)
    for row in rows.values():
        if row.parent is not None:
            children[row.parent].append(row)
    for path in sorted(uncalled, key=lambda p: -p.count(".")):  # the deepest first
        row = rows[path]
        for child in children[path]:
            if child.counted_by != "covered":
                accumulate(row, child, ("macs", "flops"))
                add_macs_of(row, child)


def op_records(priced: Priced, op_latency: list | None = None, op_start: list | None = None):
    """A function giving (every op as an OpRecord, the seen-not-counted ones, the folded ones),
    in execution order. It keeps the events and their costs only (not the recorder, whose calls
    hold the model's modules), so a report can build the lists when they are first read."""
    events, op_costs, own_costs, kinds = priced.rec.events, priced.op_cost, priced.own_cost, priced.kind
    counts_functional = priced.counts_functional
    return lambda: _op_records(events, op_costs, own_costs, kinds, counts_functional, op_latency, op_start)


def _op_records(events, op_costs, own_costs, kinds, counts_functional, op_latency, op_start) -> tuple:
    records, seen, folded = [], [], []
    counters: dict = {}
    for i, (e, cost, own, kind) in enumerate(zip(events, op_costs, own_costs, kinds)):
        op_name, path = e.op.name, e.path
        base = f"{path}/{op_name}" if path else op_name
        seen_before = counters.get(base, 0)
        counters[base] = seen_before + 1
        counted = kind == "covered" or kind == "backward" or (kind == "functional" and counts_functional)
        r = pricing.op_record(
            e, cost, own, name=f"{base}_{seen_before}" if seen_before else base, scope=path, phase=e.phase,
            counted=counted, params=e.param_elems, param_bytes=e.param_bytes,
            mac_dtype=mac_dtype(e.inputs) if cost is not None and cost.macs else None,
            latency_ms=op_latency[i] if op_latency is not None else None,
            start_ms=op_start[i] if op_start is not None else None)
        records.append(r)
        if kind == "folded":
            folded.append(r)
        elif not counted:
            seen.append(r)
    return records, seen, folded


def unsupported(priced: Priced, module_latency: dict | None = None, total_ms: float | None = None,
                op_latency: list | None = None) -> list:
    """What the convention has no rule for, with call counts (and latency share when timed).

    Where the convention counts functional ops (``flopcount``): ops with no rule outside every
    module rule. Where it does not (``ptflops``): leaf modules without a rule that ran ops
    themselves (ptflops treats them as zero-op).
    """
    rec = priced.rec
    if priced.counts_functional:
        unpriced = ((i, e.op, e.attrs, None) for i, e in priced._functional() if priced.op_cost[i] is None)
        return pricing.unsupported_list(unpriced, op_latency)
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
    return [Unsupported("module", name, n, spent[name] / total_ms if total_ms and module_latency else None)
            for name, n in sorted(calls.items())]
