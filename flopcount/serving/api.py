"""``flopcount.serving.serve``: a model served at request rates, simulated.

    >>> from flopcount import serving
    >>> result = serving.serve("llama2_7b", "h100-sxm", rates=[2.0], prompt="512", output="128",
    ...                        dtype="bf16", duration=30)                        # doctest: +SKIP
    >>> result.points[0].ttft.p50                                                  # doctest: +SKIP
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..hardware import get as hardware_profile
from .simulator import Run, Server, simulate
from .steptime import StepTime, fit
from .workload import Lengths, Request, WorkloadError, poisson

MEMORY_UTILIZATION = 0.9    # vLLM's default share of the device's memory a server takes


@dataclass(frozen=True)
class Percentiles:
    mean: float
    p50: float
    p90: float
    p99: float

    @classmethod
    def of(cls, values) -> "Percentiles":
        values = np.asarray(list(values), float)
        if values.size == 0:
            return cls(math.nan, math.nan, math.nan, math.nan)
        return cls(float(values.mean()), *(float(np.percentile(values, q)) for q in (50, 90, 99)))

    def to_dict(self) -> dict:
        return {"mean": self.mean, "p50": self.p50, "p90": self.p90, "p99": self.p99}


@dataclass
class RatePoint:
    """One simulated rate: latencies in seconds, throughput, goodput and memory."""

    rate: float
    requests: int
    seconds: float                      # until the last request finished
    ttft: Percentiles
    tpot: Percentiles
    e2e: Percentiles
    output_tokens_per_s: float
    requests_per_s: float
    goodput: float                      # requests per second that met every SLO
    mean_in_system: float               # time-averaged requests arrived and not finished
    kv_blocks: int
    kv_blocks_peak: int
    preemptions: int
    prefill_tokens: int
    gpus_for_rate: int                  # tp x the replicas whose saturated throughput covers ``rate``
    timeline: list = field(default_factory=list)   # (t, blocks in use, running, waiting), at most 400

    def to_dict(self) -> dict:
        out = {k: v for k, v in self.__dict__.items() if not isinstance(v, Percentiles)}
        out.update(ttft_s=self.ttft.to_dict(), tpot_s=self.tpot.to_dict(), e2e_s=self.e2e.to_dict())
        return out


@dataclass
class ServeResult:
    model: str
    hardware: str
    tp: int
    dtype: str
    prompt: str
    output: str
    slo: dict
    weight_bytes: int
    kv_bytes_per_token: int
    step_time: StepTime
    capacity: float                     # requests per second one replica finishes when always full
    points: list
    notes: list = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"model": self.model, "hardware": self.hardware, "tp": self.tp, "dtype": self.dtype,
                "prompt": self.prompt, "output": self.output, "slo_s": self.slo, "weight_bytes": self.weight_bytes,
                "kv_bytes_per_token": self.kv_bytes_per_token, "capacity_requests_per_s": self.capacity,
                "notes": self.notes,
                "points": [p.to_dict() for p in self.points]}


def kv_blocks(hardware, tp: int, weight_bytes: int, kv_bytes_per_token: int, block_size: int,
              memory_utilization: float = MEMORY_UTILIZATION) -> int:
    """Blocks of ``block_size`` positions the servers' memory holds after the weights."""
    left = tp * hardware.memory_bytes * memory_utilization - weight_bytes
    if left <= 0:
        raise WorkloadError(f"the weights ({weight_bytes / 1e9:.2f} GB) do not fit in {memory_utilization:.0%} of "
                            f"{tp} x {hardware.memory_bytes / 1e9:.0f} GB: more GPUs (--tp), or a smaller dtype")
    return int(left // (kv_bytes_per_token * block_size))


def serve(model, hardware, *, rates, prompt="512", output="128", duration: float = 60.0, dtype=None, tp: int = 1,
          max_batch: int = 256, max_tokens_per_step: int = 8192, block_size: int = 16, prefix_hit: float = 0.0,
          spec: str | None = None, slo: dict | None = None, seed: int = 0,
          memory_utilization: float = MEMORY_UTILIZATION, progress=None) -> ServeResult:
    """Simulate ``model`` served on ``tp`` GPUs of ``hardware`` at each of ``rates`` (requests
    per second, Poisson arrivals over ``duration`` seconds), prompts and outputs drawn from
    ``prompt`` and ``output`` (``"512"``, ``"uniform:128:2048"``...). ``spec`` is
    ``"DRAFT:K:ACCEPT"`` (a draft model, K tokens per step, each accepted with chance ACCEPT);
    ``slo`` is ``{"ttft": seconds, "tpot": seconds, "e2e": seconds}`` for the goodput."""
    from .. import llm

    _check(tp=tp, max_batch=max_batch, max_tokens_per_step=max_tokens_per_step, block_size=block_size)
    if not 0 <= prefix_hit < 1:
        raise WorkloadError(f"prefix hit must be a share in [0, 1), got {prefix_hit!r}")
    if not 0 < memory_utilization <= 1:
        raise WorkloadError(f"memory utilization must be in (0, 1], got {memory_utilization!r}")
    slo = dict(slo or {})
    unknown = set(slo) - {"ttft", "tpot", "e2e"}
    if unknown:
        raise WorkloadError(f"SLO {sorted(unknown)[0]!r}: the SLOs are ttft, tpot and e2e")
    prompts, outputs = Lengths.parse(prompt, "prompt"), Lengths.parse(output, "output")
    rates = [float(r) for r in rates]
    device = hardware_profile(hardware)
    net = llm.decoder(model, dtype)
    step_time = fit(net, device, tp=tp, max_tokens=max_tokens_per_step, progress=progress)
    kv_per_token = llm.kv_bytes_per_token(model, net.dtype) if isinstance(model, str) else \
        int(sum(layer.per_token for layer in net.layers) * net.dtype.bits / 8)
    blocks = kv_blocks(device, tp, net.weight_bytes, kv_per_token, block_size, memory_utilization)
    server = Server(step_time, blocks, block_size, max_batch, max_tokens_per_step, prefix_hit, seed=seed,
                    **_speculation(spec, dtype, device, tp, max_tokens_per_step))
    notes = [f"step times: the traced model's prefill and decode steps on {device.title}'s roofline, "
             f"{len(step_time.tokens)} sizes from 1 to {max_tokens_per_step} tokens, interpolated"]
    if any(layer.max_positions for layer in net.layers) or any(layer.state_bytes for layer in net.layers):
        notes.append("the KV blocks assume every layer caches every position (sliding windows and fixed-size "
                     "states take less: the memory figures are an upper bound)")
    capacity = saturation(server, prompts, outputs, seed)
    points = []
    for rate in rates:
        requests = poisson(rate, duration, prompts, outputs, seed)
        if not requests:
            raise WorkloadError(f"no request arrives in {duration:g} s at {rate:g}/s: a longer --duration")
        points.append(_point(rate, simulate(requests, server), slo, blocks, tp, capacity))
    return ServeResult(net.label, device.name, tp, net.dtype.name, str(prompts), str(outputs), slo, net.weight_bytes,
                       kv_per_token, step_time, capacity, points, notes)


def saturation(server: Server, prompt: Lengths, output: Lengths, seed: int = 0) -> float:
    """Requests per second the server finishes with a full queue: 8 x max_batch requests that all
    arrive at once, counted over the middle half of their finishes (no ramp-up, no tail)."""
    rng = np.random.default_rng(seed + 1)
    n = 8 * server.max_batch
    prompts, outputs = prompt.draw(rng, n), output.draw(rng, n)
    run = simulate([Request(i, 0.0, int(prompts[i]), int(outputs[i])) for i in range(n)], server)
    finishes = sorted(s.finish for s in run.requests)
    first, last = finishes[n // 4], finishes[3 * n // 4]
    return (3 * n // 4 - n // 4) / (last - first) if last > first else n / run.end


def _check(**values) -> None:
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise WorkloadError(f"{name.replace('_', ' ')} must be a whole number >= 1, got {value!r}")


def _speculation(spec, dtype, device, tp: int, max_tokens: int) -> dict:
    if spec is None:
        return {}
    from .. import llm

    draft, _, rest = str(spec).rpartition(":")
    draft, _, k = draft.rpartition(":")
    try:
        tokens, acceptance = int(k), float(rest)
    except ValueError:
        tokens, acceptance = 0, -1.0
    if not draft or tokens < 1 or not 0 <= acceptance <= 1:
        raise WorkloadError(f"--spec {spec!r}: expected DRAFT:K:ACCEPT, e.g. llama:4:0.7 (a draft model, K >= 1 "
                            f"tokens per step, each accepted with chance 0 <= ACCEPT <= 1)")
    draft_time = fit(llm.decoder(draft, dtype), device, tp=tp, max_tokens=max_tokens)
    return {"draft": draft_time, "draft_tokens": tokens, "acceptance": acceptance}


def _point(rate: float, run: Run, slo: dict, blocks: int, tp: int, capacity: float) -> RatePoint:
    done = run.requests
    ttft = [s.first_token - s.request.arrival for s in done]
    tpot = [(s.finish - s.first_token) / (s.request.output - 1) for s in done if s.request.output > 1]
    e2e = [s.finish - s.request.arrival for s in done]
    good = sum(1 for s, a, e in zip(done, ttft, e2e)
               if a <= slo.get("ttft", math.inf) and e <= slo.get("e2e", math.inf)
               and (s.request.output <= 1 or (s.finish - s.first_token) / (s.request.output - 1)
                    <= slo.get("tpot", math.inf)))
    steps = run.steps
    stride = max(1, len(steps) // 400)
    return RatePoint(
        rate=rate, requests=len(done), seconds=run.end, ttft=Percentiles.of(ttft), tpot=Percentiles.of(tpot),
        e2e=Percentiles.of(e2e), output_tokens_per_s=sum(s.request.output for s in done) / run.end,
        requests_per_s=len(done) / run.end, goodput=good / run.end, mean_in_system=run.area / run.end,
        kv_blocks=blocks, kv_blocks_peak=max(s[3] for s in steps), preemptions=run.preemptions,
        prefill_tokens=run.prefill_tokens, gpus_for_rate=tp * max(1, math.ceil(rate / capacity - 1e-9)),
        timeline=[(s[0], s[3], s[4], s[5]) for s in steps[::stride]])
