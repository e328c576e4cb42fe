"""The check between views: the eager report and the graph report of the same model, input and
convention must agree, module by module.

Under ``flopcount`` a module's graph total (its scope's nodes) equals its eager total (module
rule, or children plus functional part). Under ``ptflops`` the graph total equals the eager
total plus the ops the eager view saw but did not count. A difference is reported at the
deepest modules that disagree, with the ops the graph ran there, so it names its cause.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field


@dataclass
class Difference:
    """One module whose totals differ between the views."""

    name: str
    type: str
    eager: tuple              # (macs, flops) the eager view counts (+ seen, not counted)
    graph: tuple              # (macs, flops) the graph view counts
    ops: list = field(default_factory=list)   # the graph's ops in this scope: (name, op, macs, flops)

    def __str__(self) -> str:
        ops = ", ".join(f"{op}={macs}/{flops}" for _, op, macs, flops in self.ops[:8])
        more = f" (+{len(self.ops) - 8} more)" if len(self.ops) > 8 else ""
        return (f"{self.name or '<model>'} ({self.type}): eager MACs/FLOPs {self.eager[0]}/{self.eager[1]}, "
                f"graph {self.graph[0]}/{self.graph[1]}; graph ops: {ops}{more}")


def _inside(scope: str, path: str) -> bool:
    return path == "" or scope == path or scope.startswith(path + ".")


def view_differences(eager, graph) -> list:
    """The deepest modules whose eager and graph totals differ (empty when the views agree)."""
    seen = defaultdict(lambda: [0, 0])
    for rec in eager.seen_not_counted:
        for path in _ancestors(rec.scope):
            seen[path][0] += rec.macs
            seen[path][1] += rec.flops
    graph_rows = {r.name: r for r in graph.rows if r.kind == "scope"}
    wrong = {}
    for row in eager.rows:
        if row.counted_by == "covered" or row.name not in graph_rows:
            continue
        g = graph_rows[row.name]
        expected = (row.macs + seen[row.name][0], row.flops + seen[row.name][1])
        if expected != (g.macs, g.flops):
            wrong[row.name] = Difference(row.name, row.type, expected, (g.macs, g.flops))
    deepest = [d for name, d in wrong.items()
               if not any(other != name and _inside(other, name) for other in wrong)]
    for d in deepest:
        d.ops = [(r.name, r.op, r.macs, r.flops) for r in graph.by_op("forward") if _inside(r.scope, d.name)]
    return sorted(deepest, key=lambda d: d.name)


def _ancestors(scope: str) -> list:
    out = [""]
    if scope:
        parts = scope.split(".")
        out += [".".join(parts[: i + 1]) for i in range(len(parts))]
    return out
