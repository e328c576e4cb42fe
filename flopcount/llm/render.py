"""An LLMReport as text (a header, then per phase a table by layer and a table by op type) and as a
JSON-ready dict (raw integers, every op). Identical consecutive layers show as one row:
``model.layers.0-31 (x32)`` with the counts of one layer."""

from __future__ import annotations

from tabulate import tabulate

from .. import runtime as rt
from ..hardware import COMPUTE, MEMORY
from ..report.units import (bytes_to_string, flops_to_string, macs_to_string, params_to_string, rate_to_string,
                            time_to_string)
from .step import COUNTS, Counts

HEADERS = ["MACs", "FLOPs", "weights read", "KV read", "KV written", "activations", "FLOP/byte"]


def _phase_name(phase) -> str:
    kind = type(phase).__name__
    if kind == "Prefill":
        return f"prefill {phase.tokens}"
    if kind == "Decode":
        return f"decode at context {phase.context}"
    return f"generate {phase.prompt}:{phase.new_tokens}"


def _cells(c: Counts) -> list:
    intensity = c.intensity
    return [macs_to_string(c.macs), flops_to_string(c.flops), bytes_to_string(c.weight_read),
            bytes_to_string(c.kv_read), bytes_to_string(c.kv_written),
            bytes_to_string(c.activation_read + c.activation_written),
            "-" if intensity is None else f"{intensity:.3g}"]


def _timing(seconds: float, memory_seconds: float) -> list:
    """The time and the share of it spent in memory-bound ops."""
    share = f"{100 * memory_seconds / seconds:.0f}%" if seconds else "-"
    return [time_to_string(seconds * 1e3), share]


def _collapsed(groups: list) -> list:
    """[(label, Counts, members)]: runs of layers with equal counts as one row."""
    rows: list = []
    for g in groups:
        prefix, _, index = g.name.rpartition(".")
        last = rows[-1] if rows else None
        if (last is not None and index.isdigit() and last[3] == prefix and last[1].counts() == g.counts()
                and last[4] + len(last[2]) == int(index)):
            last[2].append(g)
            continue
        rows.append([g.name, g, [g], prefix if index.isdigit() else None, int(index) if index.isdigit() else -1])
    out = []
    for name, counts, members, prefix, first in rows:
        label = name if len(members) == 1 else f"{prefix}.{first}-{first + len(members) - 1} (x{len(members)})"
        out.append((label, counts, members))
    return out


def _group_table(groups: list, ops: list, times: list | None, fmt: str) -> str:
    """Rows by group (one row per run of equal layers, counts of one), then the total."""
    per_group: dict = {}
    if times is not None:
        for op, (seconds, bound) in zip(ops, times):
            spent = per_group.setdefault(op.group, [0.0, 0.0])
            spent[0] += seconds
            spent[1] += seconds if bound == MEMORY else 0.0
    rows = []
    total = Counts()
    for label, counts, members in _collapsed(groups):
        row = [label] + _cells(counts)
        if times is not None:
            seconds, memory = per_group.get(members[0].name, (0.0, 0.0))
            row += _timing(seconds, memory)
        rows.append(row)
        for m in members:
            total.add(m)
    row = ["total"] + _cells(total)
    if times is not None:
        row += _timing(sum(s for s, _ in per_group.values()), sum(m for _, m in per_group.values()))
    rows.append(row)
    headers = ["group"] + HEADERS + (["time", "memory-bound"] if times is not None else [])
    return tabulate(rows, headers=headers, tablefmt=fmt, disable_numparse=True)


def _op_type_table(ops: list, times: list | None, fmt: str) -> str:
    """Rows by op type (linear, matmul, softmax...), summed over the step; views (reshape,
    permute...: no bytes, no FLOPs) left out."""
    kinds: dict = {}
    for i, op in enumerate(ops):
        if op.bytes == 0 and op.flops == 0:
            continue
        entry = kinds.setdefault(op.op, [0, Counts(), 0.0, 0.0, {COMPUTE: 0, MEMORY: 0}])
        entry[0] += 1
        entry[1].add(op)
        if times is not None:
            seconds, bound = times[i]
            entry[2] += seconds
            entry[3] += seconds if bound == MEMORY else 0.0
            entry[4][bound] += 1
    rows = []
    for name, (count, counts, seconds, memory, bounds) in sorted(kinds.items(), key=lambda kv: -kv[1][1].flops):
        row = [name, count] + _cells(counts)
        if times is not None:
            row += [time_to_string(seconds * 1e3), f"{bounds[COMPUTE]} compute, {bounds[MEMORY]} memory"]
        rows.append(row)
    headers = ["op", "count"] + HEADERS + (["time", "ops bound by"] if times is not None else [])
    return tabulate(rows, headers=headers, tablefmt=fmt, disable_numparse=True)


def render_text(report, fmt: str = "simple") -> str:
    """The report for people (see the module docstring)."""
    r = report
    times = r.roofline
    lines = [f"{r.model} · {_phase_name(r.phase)} · batch {r.batch} · {r.dtype} · "
             f"{r.attn_implementation} attention",
             f"parameters {params_to_string(r.params)} · weights {bytes_to_string(r.weight_bytes)} · "
             f"KV cache {bytes_to_string(r.kv_bytes_per_token)} per token, {bytes_to_string(r.kv_cache_bytes)} "
             f"at the end (batch {r.batch})",
             f"peak memory {bytes_to_string(r.peak_memory)} (weights, KV cache and activations at the step "
             f"that needs most)"]
    if r.moe is not None:
        m = r.moe
        lines.append(f"mixture of experts: {m.layers} layers of {m.experts} experts, top-{m.top_k}; "
                     f"{params_to_string(m.total_params)} parameters, {params_to_string(m.active_params)} active "
                     f"per token ({params_to_string(m.active_params_without_embeddings)} without the embedding "
                     f"table)")
        lines.append(f"a decode step at batch {r.batch}: the {r.routing} routing traced runs "
                     f"{_experts_run(r):g} experts per layer; a uniformly random one would touch "
                     f"{m.expected_experts(r.batch):.2f} (E·(1-(1-k/E)^B)), reading "
                     f"{bytes_to_string(m.expert_bytes_read(r.batch, _bits(r)))} of expert weights")
    lines += _cache_lines(r, fmt)
    per_token = _flops_per_token(r)
    if per_token:
        lines.append("FLOPs per token: " + ", ".join(f"{flops_to_string(value)} ({name})" for name, value in per_token))
    lines += r.notes
    if r.prefill is not None:
        t = times.prefill.ops if times is not None else None
        lines += ["", f"prefill: {r.prefill.queries} tokens per sequence",
                  _group_table(r.prefill.groups, r.prefill.ops, t, fmt), "",
                  _op_type_table(r.prefill.ops, t, fmt)]
    if r.decode is not None:
        contexts = r.decode.contexts
        last = r.decode.last
        t = times.last_decode.ops if times is not None else None
        if len(contexts) > 1:
            lines += ["", f"decode: {len(contexts)} steps at contexts {contexts.start}-{contexts.stop - 1}, "
                          f"summed (traced at {', '.join(str(c) for c in r.decode.traced)}, the rest by the "
                          f"steps' affine cost)",
                      _group_table(r.decode.groups, r.decode.ops, None, fmt)]
        lines += ["", f"decode step at context {last.context}",
                  _group_table(last.groups, last.ops, t, fmt), "", _op_type_table(last.ops, t, fmt)]
    if times is not None:
        lines += ["", _roofline_line(r, times)]
    return "\n".join(lines)


def _experts_run(report) -> float:
    """Experts per MoE layer the traced decode routing runs: ``balanced`` min(E, B·k), ``worst``
    k, ``real`` the mean of the distinct experts each layer's router chose."""
    m = report.moe
    if report.routing == "real" and report.routing_choices:
        return sum(len(set(chosen)) for _, chosen in report.routing_choices) / len(report.routing_choices)
    if report.routing == "worst":
        return m.top_k
    return min(m.experts, report.batch * m.top_k)


def _flops_per_token(report) -> list:
    """[(step, FLOPs per token)]: the prefill's over its prompt, the last decode step's."""
    out = []
    if report.prefill is not None:
        out.append((f"prefill of {report.prefill.queries}", report.prefill.total.flops / (report.batch * report.prefill.queries)))
    if report.decode is not None:
        out.append((f"decode step at context {report.decode.last.context}", report.decode.last.total.flops / report.batch))
    return out


def _cache_lines(report, fmt: str) -> list:
    """The cache by kind of layer: how many, what each keeps per token, its window or state."""
    if not report.layers:
        return []
    nbytes = _bits(report, report.kv_dtype) / 8
    kinds: dict = {}
    for layer in report.layers:
        key = (layer.kind, layer.per_token, layer.max_positions, layer.state_bytes)
        kinds[key] = kinds.get(key, 0) + 1
    rows = []
    for (kind, per_token, kept, state), count in kinds.items():
        positions = "-" if not per_token else "all" if kept is None else f"{kept:,}"
        rows.append([kind, count, bytes_to_string(per_token * nbytes), positions,
                     bytes_to_string(state) if state else "-"])
    table = tabulate(rows, headers=["cache", "layers", "per token", "positions kept", "fixed state"],
                     tablefmt=fmt, disable_numparse=True)
    return ["", f"KV cache ({report.kv_dtype}) by kind of layer, per sequence:", table, ""]


def _bits(report, dtype: str | None = None) -> int:
    return rt.get_dtype(dtype or report.dtype).bits


def _roofline_line(report, times) -> str:
    d = times.profile
    parts = [f"roofline on {d.name} ({rate_to_string(times.peak_flops, 'FLOP')} {times.dtype}, "
             f"{rate_to_string(d.memory_bandwidth, 'B')}, ridge {times.ridge:.0f} FLOP/byte)"]
    if times.time_to_first_token is not None:
        parts.append(f"time to first token {time_to_string(times.time_to_first_token * 1e3)}")
    if times.time_per_output_token is not None:
        parts.append(f"time per output token {time_to_string(times.time_per_output_token * 1e3)}")
        parts.append(f"{times.tokens_per_second:.4g} tokens/s (batch {report.batch})")
    verdict = "fits" if times.fits else "does not fit"
    parts.append(f"weights + KV cache {bytes_to_string(times.needed_bytes)} {verdict} in "
                 f"{bytes_to_string(d.memory_bytes)}")
    return " · ".join(parts)


def report_dict(report, ops: bool = True) -> dict:
    """Raw numbers: header fields, per step the groups (and ops), totals, roofline."""
    r = report

    def step_dict(step, times=None) -> dict:
        out = {"queries": step.queries, "context": step.context, "total": _counts(step.total),
               "kv_cache_bytes": step.kv_cache_bytes, "activation_peak": step.activation_peak,
               "peak_memory": step.peak_memory,
               "groups": [{"name": g.name, **_counts(g)} for g in step.groups]}
        if ops:
            out["ops"] = [{"name": o.name, "op": o.op, "group": o.group, **_counts(o)} for o in step.ops]
            if times is not None:
                for entry, (seconds, bound) in zip(out["ops"], times.ops):
                    entry["time_s"], entry["bound"] = seconds, bound
        if times is not None:
            out["time_s"] = times.seconds
        return out

    t = r.roofline
    doc = {"model": r.model, "phase": _phase_name(r.phase), "batch": r.batch, "dtype": r.dtype,
           "attn_implementation": r.attn_implementation, "params": r.params, "weight_bytes": r.weight_bytes,
           "kv_bytes_per_token": r.kv_bytes_per_token, "kv_cache_bytes": r.kv_cache_bytes,
           "peak_memory": r.peak_memory, "total": _counts(r.total), "notes": list(r.notes),
           "kv_dtype": r.kv_dtype, "moe_routing": r.routing,
           "flops_per_token": {name: value for name, value in _flops_per_token(r)}}
    context = r.steps[-1].context + r.steps[-1].queries
    nbytes = _bits(r, r.kv_dtype) / 8
    doc["cache_layers"] = [layer.to_dict(context, nbytes) for layer in r.layers]
    if r.routing_choices:
        doc["routing_choices"] = [{"layer": layer, "experts": experts} for layer, experts in r.routing_choices]
    if r.moe is not None:
        doc["moe"] = r.moe.to_dict(r.batch)
    if r.prefill is not None:
        doc["prefill"] = step_dict(r.prefill, t.prefill if t else None)
    if r.decode is not None:
        doc["decode"] = {"contexts": [r.decode.contexts.start, r.decode.contexts.stop - 1],
                         "traced": r.decode.traced, "total": _counts(r.decode.total),
                         "groups": [{"name": g.name, **_counts(g)} for g in r.decode.groups],
                         "last_step": step_dict(r.decode.last, t.last_decode if t else None)}
    if t is not None:
        doc["roofline"] = {"device": t.profile.name, "peak_flops": t.peak_flops,
                           "bandwidth": t.profile.memory_bandwidth, "memory": t.profile.memory_bytes,
                           "time_to_first_token_s": t.time_to_first_token,
                           "time_per_output_token_s": t.time_per_output_token,
                           "tokens_per_second": t.tokens_per_second, "decode_s": t.decode_seconds,
                           "needed_bytes": t.needed_bytes, "fits": t.fits}
    return doc


def _counts(c: Counts) -> dict:
    out = {name: getattr(c, name) for name in COUNTS}
    out["bytes_read"], out["bytes_written"], out["intensity"] = c.bytes_read, c.bytes_written, c.intensity
    return out
