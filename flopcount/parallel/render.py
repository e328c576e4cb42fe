"""A plan's report as text (tables for people) and as a dict (JSON: raw integers and seconds)."""

from __future__ import annotations

from tabulate import tabulate

from ..report.units import bytes_to_string as _gb, flops_to_string as _flops, params_to_string


def as_text(report) -> str:
    """Header, the per-rank table (one row per pipeline stage), the traffic per step, and the
    time and utilization when a hardware profile or a step time is known."""
    p = report.plan
    lines = [f"{report.model}: {p.describe()}",
             f"{p.gpus} GPUs, {p.micro_batches} micro-batches per step, {report.tokens_per_step:,} tokens per step",
             "", "Per rank of each pipeline stage (FLOPs per micro-batch; memory at the rank's peak):"]
    rows = []
    for s in report.stages:
        layers = f"{s.blocks.start}-{s.blocks.stop - 1}" if len(s.blocks) else "-"
        rows.append([s.index, layers, params_to_string(s.params), _flops(s.forward_flops), _flops(s.backward_flops),
                     _flops(s.recompute_flops), _gb(s.weights), _gb(s.gradients), _gb(s.optimizer),
                     f"{_gb(s.activations)} ({s.in_flight})", _gb(s.working), _gb(s.peak)])
    lines.append(tabulate(rows, headers=["stage", "layers", "params", "forward", "backward", "recompute",
                                         "weights", "grads", "optimizer", "activations (in flight)", "working",
                                         "peak"], tablefmt="simple", disable_numparse=True))
    if report.memory_limit is not None:
        verdict = "fits" if report.fits else "does NOT fit"
        lines.append(f"peak {_gb(report.peak_bytes)} of {_gb(report.memory_limit)}: {verdict}")
    lines += ["", "Communication per step (bytes one rank sends; the stage that sends most):"]
    worst = max(report.traffic, key=lambda t: sum(x.sent for x in t)) if report.traffic else []
    rows = [[t.kind, t.axis, t.group, t.what, t.count, _gb(t.sent)] for t in worst]
    lines.append(tabulate(rows, headers=["collective", "axis", "ranks", "moves", "count", "sent"],
                          tablefmt="simple", disable_numparse=True) if rows else "  none")
    lines += ["", f"Model FLOPs per step: {_flops(report.model_flops_per_step)} ({report.convention})",
              f"Hardware FLOPs per step: {_flops(report.hardware_flops_per_step)} (every rank, recompute included)"]
    if report.step_time_s is not None and report.hardware is not None:
        how = "measured" if report.step_time_measured else \
            "estimate: op rooflines + collectives at link bandwidth, no overlap"
        text = f"Step time on {report.hardware.name}: {report.step_time_s:.3g} s ({how})"
        if report.bubble_s is not None and p.pp > 1:
            text += f", pipeline bubble {report.bubble_s:.3g} s"
        lines += [text, f"MFU {100 * report.mfu:.1f}%, HFU {100 * report.hfu:.1f}% "
                        f"(peak {report.hardware.peak(p.dtype) / 1e12:g} TFLOP/s {p.dtype} per GPU)"]
    return "\n".join(lines)


def as_dict(report) -> dict:
    """Every figure of the report, raw (bytes, FLOPs, seconds)."""
    p = report.plan
    return {
        "model": report.model,
        "plan": {"dp": p.dp, "tp": p.tp, "pp": p.pp, "micro_batch": p.micro_batch, "global_batch": p.global_batch,
                 "micro_batches": p.micro_batches, "zero": p.zero, "sequence_parallel": p.sequence_parallel,
                 "recompute": p.recompute, "dtype": p.dtype, "gpus": p.gpus},
        "input_shape": list(report.input_shape),
        "tokens_per_step": report.tokens_per_step,
        "stages": [{"stage": s.index, "layers": [s.blocks.start, s.blocks.stop], "params": s.params,
                    "forward_flops": s.forward_flops, "backward_flops": s.backward_flops,
                    "recompute_flops": s.recompute_flops, "weights_bytes": s.weights,
                    "gradients_bytes": s.gradients, "optimizer_bytes": s.optimizer,
                    "activations_bytes": s.activations, "saved_per_micro_batch_bytes": s.saved_per_micro_batch,
                    "in_flight": s.in_flight, "working_bytes": s.working, "peak_bytes": s.peak,
                    "seconds_per_micro_batch": s.slot_s} for s in report.stages],
        "traffic": [[{"collective": t.kind, "axis": t.axis, "ranks": t.group, "moves": t.what, "count": t.count,
                      "sent_bytes": t.sent} for t in stage] for stage in report.traffic],
        "model_flops_per_step": report.model_flops_per_step,
        "hardware_flops_per_step": report.hardware_flops_per_step,
        "convention": report.convention,
        "hardware": None if report.hardware is None else report.hardware.name,
        "memory_limit_bytes": report.memory_limit,
        "fits": report.fits,
        "step_time_s": report.step_time_s,
        "step_time_measured": report.step_time_measured,
        "bubble_s": report.bubble_s,
        "mfu": report.mfu,
        "hfu": report.hfu,
    }


def search_text(result) -> str:
    """The best plans of a search, fastest first, one line each."""
    lines = [f"{result.model} on {result.gpus} x {result.hardware.name} "
             f"({_gb(result.hardware.memory_bytes)} each), global batch {result.global_batch}: "
             f"{result.considered} plans priced, {result.fitting} fit in memory"]
    rows = []
    for rank, r in enumerate(result.best, 1):
        p = r.plan
        tokens = r.tokens_per_step / r.step_time_s
        rows.append([rank, f"dp={p.dp} tp={p.tp} pp={p.pp}", p.micro_batch, p.zero, "yes" if p.sequence_parallel else "no",
                     p.recompute, _gb(r.peak_bytes), f"{r.step_time_s:.3g} s", f"{100 * r.mfu:.1f}%", f"{tokens:,.0f}"])
    lines.append(tabulate(rows, headers=["#", "plan", "micro-batch", "ZeRO", "seq. parallel", "recompute",
                                         "peak memory", "step time", "MFU", "tokens/s"],
                          tablefmt="simple", disable_numparse=True) if rows else "no plan fits")
    lines += [f"skipped {s}" for s in result.skipped]
    return "\n".join(lines)
