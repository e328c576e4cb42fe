"""``engine="onnxruntime"``: an ONNX file timed by onnxruntime itself, node by node, beside
flopcount's counts of the same file.

onnxruntime runs the file as it deploys it: its graph optimizations (fusions, the NCHWc
layout), the execution provider for the device asked (CPU, or CUDA for ``device="cuda"``) and
``threads`` intra-op threads (None: onnxruntime's default). Two sessions: one without the
profiler times whole runs (``repeat`` after ``warmup``, median and minimum; on one intra-op
thread by the calling thread's CPU time, ``runtime/clock.py``, else wall time); one with
onnxruntime's profiler gives each node's kernel time per run. The per-node times are those of
the profiled run whose ``model_run`` is the median, so they add up as one run does (its
``model_run`` is onnxruntime's own total, ``profiled_ms``).

**The join.** onnxruntime runs an optimized graph whose nodes are not the file's: a Conv fused
with its Relu and Add, NCHWc convs between ReorderInput/ReorderOutput nodes. The optimized
graph (written by the session) says what each of its nodes computes by the values it reads and
writes: a value name of the file is that value; a layout node's output is its input's value;
a node without such an output takes the value its name gives (``<value>_nchwc``) or the
outputs of the file's node of its name. The file's nodes an optimized node covers are those
between its inputs and outputs (walking back from the outputs through the file's graph until
its inputs). flopcount's counts of those nodes (every runtime op converted from them:
``OpRecord.source``) are its counts. An optimized node covering none is listed as not joined
(layout reorders, casts onnxruntime inserts); so is any file node no optimized node covers.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from dataclasses import dataclass, field

from ..report.model import Achieved
from ..runtime import clock, errors

NAME = "onnxruntime"
_LAYOUT_OPS = ("ReorderInput", "ReorderOutput", "Transpose")  # ops onnxruntime's layout passes add


@dataclass
class EngineNode(Achieved):
    """One node of onnxruntime's optimized graph: its measured time in the median profiled run
    (``latency_ms``), its op type and provider, the file's nodes it covers (``sources``) and
    flopcount's counts of them."""

    name: str
    op_type: str
    provider: str = ""
    latency_ms: float = 0.0
    sources: list = field(default_factory=list)
    macs: int = 0
    flops: int = 0
    bytes_read: int = 0
    bytes_written: int = 0

    @property
    def joined(self) -> bool:
        return bool(self.sources)

    def to_dict(self) -> dict:
        return {"name": self.name, "op_type": self.op_type, "provider": self.provider,
                "latency_ms": self.latency_ms, "sources": list(self.sources), "macs": self.macs,
                "flops": self.flops, "bytes_read": self.bytes_read, "bytes_written": self.bytes_written,
                "flops_per_second": self.flops_per_second, "bytes_per_second": self.bytes_per_second}


@dataclass
class OrtTimes:
    """``whole`` (median, min ms of unprofiled runs), ``profiled_ms`` (onnxruntime's own total of
    the median profiled run), ``nodes`` (that run's per-node times: [EngineNode] in run order),
    ``optimized`` (the optimized ModelProto), ``threads`` and ``providers`` used."""

    whole: tuple
    profiled_ms: float
    nodes: list
    optimized: object
    threads: int | None
    providers: list


def _ort():
    try:
        import onnxruntime
    except ImportError:
        raise errors.FlopcountError("engine 'onnxruntime' needs the onnxruntime package "
                                    "(pip install onnxruntime)") from None
    return onnxruntime


def providers(device: str) -> list:
    """The execution providers for ``device``; a one-line DeviceError where this onnxruntime
    cannot run on it."""
    available = _ort().get_available_providers()
    if str(device).startswith("cuda"):
        if "CUDAExecutionProvider" not in available:
            raise errors.DeviceError(f"engine 'onnxruntime' on {device}: this onnxruntime has no "
                                     f"CUDAExecutionProvider (providers: {', '.join(available)})")
        return ["CUDAExecutionProvider", "CPUExecutionProvider"]
    return ["CPUExecutionProvider"]


def time_file(path: str, feeds: dict, *, device: str = "cpu", threads: int | None = None,
              warmup: int = 1, repeat: int = 5) -> OrtTimes:
    """Time the ONNX file at ``path`` on ``feeds`` ({input name: numpy array}) in onnxruntime,
    whole and per node (see the module docstring)."""
    import onnx

    ort = _ort()
    chosen = providers(device)
    with tempfile.TemporaryDirectory(prefix="flopcount-ort-") as folder:
        def options(profiled: bool):
            so = ort.SessionOptions()
            so.log_severity_level = 3  # not its warning that an NCHWc model is machine-specific
            if threads is not None:
                so.intra_op_num_threads = int(threads)
            if profiled:
                so.enable_profiling = True
                so.profile_file_prefix = os.path.join(folder, "profile")
                so.optimized_model_filepath = os.path.join(folder, "optimized.onnx")
            return so

        try:
            plain = ort.InferenceSession(path, options(False), providers=chosen)
            wholes = []
            for _ in range(warmup):
                plain.run(None, feeds)
            # the thread's CPU time on one intra-op thread (runtime/clock.py); wall time on a GPU,
            # where the thread waits for the device and its CPU time is not the run's
            now = time.perf_counter if chosen[0] == "CUDAExecutionProvider" else clock.read
            for _ in range(repeat):
                begun = now()
                plain.run(None, feeds)
                wholes.append((now() - begun) * 1e3)
            del plain
            session = ort.InferenceSession(path, options(True), providers=chosen)
            for _ in range(warmup + repeat):
                session.run(None, feeds)
            trace = session.end_profiling()
        except (ort.capi.onnxruntime_pybind11_state.Fail, RuntimeError, ValueError) as exc:
            raise errors.FlopcountError(f"engine 'onnxruntime' could not run {path}: "
                                        f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
        with open(trace) as f:
            events = json.load(f)
        optimized = onnx.load(os.path.join(folder, "optimized.onnx"), load_external_data=False)
    runs = _runs(events)[warmup:] or _runs(events)
    median = sorted(runs, key=lambda run: run[0])[(len(runs) - 1) // 2]
    return OrtTimes((statistics.median(wholes), min(wholes)), median[0], median[1], optimized, threads, chosen)


def _runs(events: list) -> list:
    """[(model_run ms, [EngineNode])] per run, from onnxruntime's profiler events: the node
    kernel times between two ``model_run`` events belong to the second."""
    runs, nodes = [], {}
    for e in events:
        if e.get("cat") == "Node" and str(e.get("name", "")).endswith("_kernel_time"):
            name = e["name"][: -len("_kernel_time")]
            args = e.get("args", {})
            node = nodes.get(name)
            if node is None:
                node = nodes[name] = EngineNode(name, args.get("op_name", ""), args.get("provider", ""))
            node.latency_ms += e.get("dur", 0) / 1e3
        elif e.get("cat") == "Session" and e.get("name") == "model_run":
            runs.append((e.get("dur", 0) / 1e3, list(nodes.values())))
            nodes = {}
    return runs


# --- the join ------------------------------------------------------------------------------

def covered_nodes(original, optimized) -> dict:
    """{optimized node name: [names of the file's nodes it computes]} (see the module docstring);
    ``original`` and ``optimized`` are ModelProtos."""
    producer = {}
    for node in original.graph.node:
        for out in node.output:
            if out:
                producer[out] = node
    by_name = {node.name: node for node in original.graph.node if node.name}
    # an optimized value that is a layout copy of a file's value stands for that value
    alias = {}
    for node in optimized.graph.node:
        if node.op_type in _LAYOUT_OPS and node.input and node.output:
            a, b = node.input[0], node.output[0]
            if b in producer and a not in producer:
                alias[a] = b
            elif a in producer and b not in producer:
                alias[b] = a

    def value(name: str) -> str | None:
        name = alias.get(name, name)
        return name if name in producer else None

    out = {}
    claimed: set = set()
    for node in optimized.graph.node:
        if node.op_type in _LAYOUT_OPS and not any(o in producer for o in node.output) \
                and node.name not in by_name:
            out[node.name] = []
            continue
        ends = [v for v in (value(o) for o in node.output) if v]
        if not ends and node.name.endswith("_nchwc") and node.name[: -len("_nchwc")] in producer:
            ends = [node.name[: -len("_nchwc")]]
        if not ends and node.name in by_name:
            ends = [o for o in by_name[node.name].output if o]
        stops = {v for v in (value(i) for i in node.input) if v}
        found, stack = [], list(ends)
        seen: set = set()
        while stack:
            v = stack.pop()
            p = producer.get(v)
            if v in stops or p is None or id(p) in seen:
                continue
            seen.add(id(p))
            if p.name in claimed:  # another optimized node computes it (and what feeds it)
                continue
            found.append(p.name)
            stack.extend(i for i in p.input if i)
        claimed.update(found)
        out[node.name] = found
    return out


def shares(records: list) -> list:
    """How an engine node's time is shared over the ops it covers (one number per record, adding
    up to 1): in proportion to their FLOPs, to their bytes moved where they have no FLOPs, equally
    where they have neither.

    >>> from flopcount.report.model import OpRecord
    >>> [round(s, 2) for s in shares([OpRecord("c", "conv", "", flops=900), OpRecord("r", "relu", "", flops=100)])]
    [0.9, 0.1]
    >>> shares([OpRecord("a", "reshape", ""), OpRecord("b", "reshape", "")])
    [0.5, 0.5]
    """
    for weight in (lambda r: r.flops, lambda r: r.bytes_read + r.bytes_written, lambda r: 1):
        weights = [weight(r) for r in records]
        total = sum(weights)
        if total:
            return [w / total for w in weights]
    return []


SHARED_NOTE = ("op rows: a fused engine node's time is shared over the ops it covers in proportion to their "
               "FLOPs (bytes moved where they have none); module rows sum their ops' shares")


def put_on_ops(report, node_ops: list) -> None:
    """Each engine node's time on flopcount's op records and op rows: ``node_ops`` is [(ms, [the
    forward OpRecords it covers])]; a node's time is shared over its ops (``shares``), the op rows
    take their records' shares and every scope above them their sum. Rows and records no node
    covers have no time; the root row is set by the caller."""
    for record in report.by_op("forward"):
        record.latency_ms = None
    by_name = {r.name: r for r in report.rows}
    for row in report.rows:
        row.latency_ms = row.latency_min_ms = None
    for ms, records in node_ops:
        for record, share in zip(records, shares(records)):
            record.latency_ms = (record.latency_ms or 0.0) + ms * share
    for record in report.by_op("forward"):
        row = by_name.get(record.name)
        if record.latency_ms is None or row is None:
            continue
        path = row.name
        while path is not None:  # the op row and every scope above it
            r = by_name[path]
            r.latency_ms = (r.latency_ms or 0.0) + record.latency_ms
            path = r.parent


def join(report, times: OrtTimes, original) -> None:
    """Put onnxruntime's times on the report: per optimized node (``report.engine_nodes``,
    with flopcount's counts of the file's nodes it covers), per op (an optimized node's time
    shared over the file's ops it covers: ``put_on_ops``, so the op and op-type views show it
    and every scope sums what onnxruntime spent in it; the root row every node's time), the
    whole run on the report; what could not be joined goes into the report's notes."""
    records: dict = {}
    for record in report.by_op("forward"):
        if record.source:
            records.setdefault(record.source, []).append(record)
    covers = covered_nodes(original, times.optimized)
    joined_sources: set = set()
    node_ops = []
    for node in times.nodes:
        node.sources = [s for s in covers.get(node.name, []) if s]
        mine = [r for s in node.sources for r in records.get(s, [])]
        for r in mine:
            node.macs += r.macs
            node.flops += r.flops
            node.bytes_read += r.bytes_read
            node.bytes_written += r.bytes_written
        joined_sources.update(node.sources)
        node_ops.append((node.latency_ms, mine))
    put_on_ops(report, node_ops)
    # what no file node accounts for (layout reorders) is the model's time still: the root's
    report.root.latency_ms = sum(n.latency_ms for n in times.nodes)
    report.latency_ms, report.latency_min_ms = times.whole
    report.engine = NAME
    report.engine_nodes = list(times.nodes)
    unjoined = [n for n in times.nodes if not n.sources]
    counted = {r.source for r in report.by_op("forward") if r.source and (r.macs or r.flops)}
    missed = sorted(counted - joined_sources)
    spent = sum(n.latency_ms for n in times.nodes)
    threads = "default" if times.threads is None else times.threads
    report.notes.append(f"onnxruntime {_ort().__version__} ({', '.join(times.providers)}, intra-op threads: "
                        f"{threads}): {len(times.nodes)} nodes after its optimizations, "
                        f"{spent:.3f} ms in nodes of {times.profiled_ms:.3f} ms in its profiled run")
    if any(len(ops) > 1 for _, ops in node_ops):
        report.notes.append(SHARED_NOTE)
    if unjoined:
        shown = ", ".join(f"{n.name} ({n.op_type})" for n in unjoined[:5]) + (", ..." if len(unjoined) > 5 else "")
        report.notes.append(f"onnxruntime nodes joined to no node of the file: {len(unjoined)}, "
                            f"{sum(n.latency_ms for n in unjoined):.3f} ms ({shown})")
    if missed:
        shown = ", ".join(missed[:5]) + (", ..." if len(missed) > 5 else "")
        report.notes.append(f"nodes of the file with counts that no onnxruntime node was joined to: "
                            f"{len(missed)} ({shown})")


def by_op_type(nodes: list) -> list:
    """Per onnxruntime op type: calls, time, FLOPs, bytes and achieved FLOP/s, most time first."""
    table: dict = {}
    for n in nodes:
        entry = table.setdefault(n.op_type, {"op_type": n.op_type, "calls": 0, "latency_ms": 0.0, "macs": 0,
                                             "flops": 0, "bytes": 0})
        entry["calls"] += 1
        entry["latency_ms"] += n.latency_ms
        entry["macs"] += n.macs
        entry["flops"] += n.flops
        entry["bytes"] += n.bytes_read + n.bytes_written
    for entry in table.values():
        seconds = entry["latency_ms"] / 1e3
        entry["flops_per_second"] = entry["flops"] / seconds if seconds else None
        entry["bytes_per_second"] = entry["bytes"] / seconds if seconds else None
    return sorted(table.values(), key=lambda e: -e["latency_ms"])


__all__ = ["EngineNode", "OrtTimes", "time_file", "covered_nodes", "join", "by_op_type", "shares", "put_on_ops",
           "SHARED_NOTE", "NAME"]
