"""Plan search: the plans for a number of GPUs that fit in memory, ranked by estimated step time.

Every split of the GPUs into data x tensor x pipeline parallel (tensor parallel within a node,
pipeline stages dividing the layers), every micro-batch size that divides the global batch, ZeRO
stage, recomputation mode and sequence parallelism is priced, as MindSpore's auto-parallel
searches a space of strategies with a cost model. Pricing a candidate from scratch (tracing
and sharding a 175B model) takes seconds, so the search prices it from parts measured once per
tensor-parallel layout: the graph is sharded for each (tp, sequence parallel), cut into one
pipeline stage per layer, and each layer's FLOPs, saved activations, parameters, op times and
collectives are measured at micro-batch 1 and scaled to the micro-batch (activations, work and
traffic grow with it; parameters do not). A candidate's stage sums its layers; what lies
before the first layer and after the last goes with the first and last stage. The best few
candidates are then estimated exactly (``plan.estimate``), and those figures are the result.

    result = parallel.search("gpt3_175b", gpus=512, hardware="h100-sxm", global_batch=1536)
    print(result)            # the best plans, fastest first
    result.best[0].plan      # the fastest: a Plan to estimate, print or run
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..runtime.errors import FlopcountError, ShapeError
from .activations import MODES, stage_activations
from .blocks import find_blocks
from .collectives import gradient_traffic, stage_traffic
from .mesh import shard_step
from .pipeline import split_stages
from .plan import Plan, _hardware, _model_and_input, _traced_step, estimate
from .states import ZERO_STAGES, bytes_per_parameter, model_states
from .step_estimate import links, node_time, pipeline_step, traffic_time


@dataclass
class _Part:
    """One layer (or the layer with what comes before or after it) at micro-batch 1."""

    params: int
    work: dict            # recompute mode -> seconds of ops per micro-batch (recomputed ones twice)
    saved: dict           # recompute mode -> bytes saved per micro-batch
    working: dict         # recompute mode -> bytes beyond the saved ones at the peak
    traffic: dict         # recompute mode -> list of Traffic per micro-batch (count 1 micro-batch)
    send: int             # bytes it sends to the next layer per micro-batch (forward + backward)


@dataclass
class SearchResult:
    """The best plans (exact reports, fastest first) and how many candidates were priced."""

    model: str
    gpus: int
    best: list
    considered: int
    fitting: int
    hardware: object = None
    global_batch: int = 0
    skipped: list = field(default_factory=list)

    def __str__(self) -> str:
        from .render import search_text

        return search_text(self)


def search(model, gpus: int, *, hardware, global_batch: int | None = None, input_shape=None,
           input_dtype=None, micro_batches=(1, 2, 4, 8), zero=ZERO_STAGES, recompute=MODES,
           dtype: str = "bfloat16", top: int = 5, attention: str = "full") -> SearchResult:
    """The ``top`` fastest plans of ``model`` on ``gpus`` GPUs of ``hardware`` that fit in its
    memory, for a step of ``global_batch`` samples (default: one per GPU)."""
    if not isinstance(gpus, int) or gpus < 1:
        raise ShapeError(f"plan search: gpus must be a positive integer, got {gpus!r}")
    hw = _hardware(hardware)
    if hw is None:
        raise FlopcountError("plan search needs a hardware profile (its memory and bandwidths)")
    global_batch = global_batch or gpus
    module, name, sample = _model_and_input(model, input_shape, input_dtype)
    seq_len = sample[0][0] if sample[0] and not sample[1].is_floating_point else None
    candidates, skipped = [], []
    for tp in _tensor_sizes(gpus, hw):
        for sp in ((False, True) if tp > 1 else (False,)):
            try:
                parts, layers = _measure(module, sample, tp, sp, dtype, hw, seq_len)
            except ShapeError as exc:
                skipped.append(f"tp={tp}{' sequence parallel' if sp else ''}: {exc}")
                continue
            for pp in _pipeline_sizes(gpus // tp, layers):
                dp = gpus // (tp * pp)
                for mb in micro_batches:
                    if global_batch % (dp * mb):
                        continue
                    for mode in recompute:
                        for z in zero:
                            if z and dp == 1:
                                continue
                            plan = Plan(dp=dp, tp=tp, pp=pp, micro_batch=mb, global_batch=global_batch, zero=z,
                                        sequence_parallel=sp, recompute=mode, dtype=dtype)
                            candidates.append((plan, *_price(plan, parts, layers, hw)))
    fitting = [c for c in candidates if c[2] <= hw.memory_bytes]
    fitting.sort(key=lambda c: (c[1], c[2]))
    best = []
    for plan, _, _ in fitting[:max(top * 2, top)]:
        report = estimate(model if isinstance(model, str) else module, plan, input_shape=sample[0],
                          input_dtype=sample[1], hardware=hw, attention=attention)
        if report.fits:
            best.append(report)
    best.sort(key=lambda r: r.step_time_s)
    return SearchResult(name, gpus, best[:top], len(candidates), len(fitting), hw, global_batch, skipped)


def _tensor_sizes(gpus: int, hw) -> list:
    """Powers of two up to a node's GPUs that divide the GPUs (tensor parallelism stays in a node)."""
    out, t = [], 1
    while t <= min(gpus, hw.devices_per_node):
        if gpus % t == 0:
            out.append(t)
        t *= 2
    return out


def _pipeline_sizes(n: int, layers: int) -> list:
    return [p for p in range(1, n + 1) if n % p == 0 and (p == 1 or (layers and layers % p == 0))]


def _measure(module, sample, tp: int, sp: bool, dtype, hw, seq_len) -> tuple:
    """Per-layer parts of the model sharded for (tp, sp) at micro-batch 1."""
    step = _traced_step(module, sample, Plan(dtype=dtype))
    rank = shard_step(step, tensor=tp, sequence_parallel=sp)
    blocks = find_blocks(n.scope for n in rank.graph.nodes[:rank.n_forward])
    units = split_stages(rank, blocks.count, blocks) if blocks.count > 1 else split_stages(rank, 1, blocks)
    link = links(hw, 1, tp)
    parts = []
    for unit in units:
        params = sum(v.numel() for v in unit.graph.parameters.values() if v.kind == "param")
        times = [node_time(n, hw, dtype) for n in unit.graph.nodes]
        work, saved, working, traffic = {}, {}, {}, {}
        for mode in MODES:
            act = stage_activations(unit, blocks, mode, seq_len)
            moves = [t for t in stage_traffic(unit, act, 1) if t.axis == "tp"]
            work[mode] = sum(times) + sum(times[i] for i in act.recomputed) + traffic_time(moves, link)
            saved[mode], working[mode], traffic[mode] = act.saved, act.working, moves
        send = sum(size for _, size, _ in unit.sends)
        parts.append(_Part(params, work, saved, working, traffic, send))
    return parts, blocks.count if len(units) > 1 else 0


def _price(plan: Plan, parts: list, layers: int, hw) -> tuple:
    """(step seconds, peak bytes) of ``plan`` from the per-layer parts."""
    b, m, mode = plan.micro_batch, plan.micro_batches, plan.recompute
    per = max(len(parts) // plan.pp, 1)
    link = links(hw, plan.dp, plan.tp)
    w_bytes, g_bytes, _ = bytes_per_parameter(plan.dtype)
    slot, peak, tail = 0.0, 0, 0.0
    for s in range(plan.pp):
        mine = parts[s * per:(s + 1) * per]
        params = sum(p.params for p in mine)
        states = model_states(params, plan.dtype, plan.zero, plan.dp)
        in_flight = min(plan.pp - s, m)
        activations = b * sum(p.saved[mode] for p in mine) * in_flight + b * max(p.working[mode] for p in mine)
        peak = max(peak, states.total + activations)
        send = b * mine[-1].send / link.pp if s < plan.pp - 1 else 0.0
        slot = max(slot, b * sum(p.work[mode] for p in mine) + send)
        sync = gradient_traffic(g_bytes * params, w_bytes * params, plan.zero, plan.dp, m)
        update = 2 * states.total / hw.memory_bandwidth
        tail = max(tail, traffic_time(sync, link) + update)
    step, _ = pipeline_step(slot, m, plan.pp)
    return step + tail, peak
