"""``flopcount serve MODEL --hardware H --rate R[,R...]``: a continuous-batching server simulated
at request rates (:mod:`flopcount.serving`), as a table, JSON or a latency-throughput plot."""

from __future__ import annotations

import json
import math

import click

from ..report.units import bytes_to_string
from ..runtime.errors import FlopcountError
from .options import with_options

FORMATS = ("table", "json")


def _rates(ctx, param, text):
    try:
        values = [float(v) for v in str(text).split(",") if v.strip()]
    except ValueError:
        values = []
    if not values or not all(v > 0 and math.isfinite(v) for v in values):
        raise click.BadParameter(f"{text!r} is not a list of request rates > 0 such as 1,2,4", ctx=ctx, param=param)
    return values


def _share(ctx, param, value):
    if value is not None and not 0 <= value < 1:
        raise click.BadParameter(f"{value!r} is not a share in [0, 1)", ctx=ctx, param=param)
    return value


def parse_slo(text: str | None) -> dict:
    """``ttft=500ms,tpot=50ms,e2e=20s`` -> {name: seconds}."""
    from .plan import parse_seconds

    slo = {}
    for part in filter(None, (p.strip() for p in (text or "").split(","))):
        name, sep, value = part.partition("=")
        if not sep or name.strip() not in ("ttft", "tpot", "e2e"):
            raise FlopcountError(f"--slo {text!r}: write ttft=500ms,tpot=50ms,e2e=20s")
        try:
            slo[name.strip()] = parse_seconds(value.strip())
        except FlopcountError:
            raise FlopcountError(f"--slo {text!r}: {value.strip()!r} is not a time such as 500ms or 2s") from None
    return slo


SERVE_OPTIONS = [
    click.option("--hardware", required=True, metavar="NAME", help="The GPUs (flopcount hardware lists them)."),
    click.option("--rate", "rates", required=True, callback=_rates, metavar="R[,R...]",
                 help="Requests per second (Poisson arrivals); several rates draw the latency-throughput curve."),
    click.option("--prompt", default="512", show_default=True, metavar="DIST",
                 help="Prompt lengths: N, uniform:LOW:HIGH, normal:MEAN:STD or lognormal:MEDIAN:SIGMA."),
    click.option("--output", "output_lengths", default="128", show_default=True, metavar="DIST",
                 help="Output lengths, as --prompt."),
    click.option("--dtype", metavar="DTYPE", help="The weights' and cache's dtype (bf16, float16...)."),
    click.option("--tp", type=click.IntRange(min=1), default=1, show_default=True, help="Tensor-parallel GPUs."),
    click.option("--max-batch", type=click.IntRange(min=1), default=256, show_default=True,
                 help="Sequences in a step at most."),
    click.option("--max-tokens-per-step", type=click.IntRange(min=1), default=8192, show_default=True,
                 help="Tokens in a step at most (prefills are chunked to fit)."),
    click.option("--block-size", type=click.IntRange(min=1), default=16, show_default=True,
                 help="Positions per KV-cache block."),
    click.option("--prefix-hit", type=float, default=0.0, show_default=True, callback=_share, metavar="SHARE",
                 help="Share of every prompt found in the prefix cache (no compute for it)."),
    click.option("--spec", metavar="DRAFT:K:ACCEPT",
                 help="Speculative decoding: a draft model, K draft tokens per step, each accepted with chance "
                      "ACCEPT (llama:4:0.7)."),
    click.option("--duration", type=click.FloatRange(min=0, min_open=True), default=60.0, show_default=True,
                 help="Seconds of arrivals per rate."),
    click.option("--slo", metavar="ttft=500ms,tpot=50ms", help="Latency objectives for the goodput."),
    click.option("--seed", type=int, default=0, show_default=True),
    click.option("-f", "--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True),
    click.option("--plot", "plot_path", type=click.Path(dir_okay=False), metavar="FILE.svg|png",
                 help="Draw TTFT and TPOT (p50, p99) against throughput over the rates."),
    click.option("-o", "--output-file", "output", type=click.Path(dir_okay=False),
                 help="Write to this file (atomically)."),
    click.option("-q", "--quiet", is_flag=True, help="No notes on stderr."),
    click.option("--debug", is_flag=True, help="Show the traceback of an error."),
]


serve_options = with_options(SERVE_OPTIONS)


def render(result, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(result.to_dict(), indent=2) + "\n"
    from tabulate import tabulate

    slo = result.slo
    headers = ["rate/s", "served/s", "tokens/s", "TTFT p50", "TTFT p99", "TPOT p50", "TPOT p99", "E2E p50"] + \
        (["goodput/s"] if slo else []) + ["KV peak", "preempted", "GPUs"]
    body = []
    for p in result.points:
        body.append([f"{p.rate:g}", f"{p.requests_per_s:.3g}", f"{p.output_tokens_per_s:.4g}", _ms(p.ttft.p50),
                     _ms(p.ttft.p99), _ms(p.tpot.p50), _ms(p.tpot.p99), _ms(p.e2e.p50)]
                    + ([f"{p.goodput:.3g}"] if slo else [])
                    + [f"{p.kv_blocks_peak / p.kv_blocks:.0%}", str(p.preemptions), str(p.gpus_for_rate)])
    lines = [f"{result.model} on {result.tp} x {result.hardware} ({result.dtype}): prompts {result.prompt}, "
             f"outputs {result.output} tokens",
             tabulate(body, headers=headers, tablefmt="simple", disable_numparse=True), "",
             f"KV cache: {result.points[0].kv_blocks} blocks ({bytes_to_string(result.kv_bytes_per_token)} per "
             f"token); weights {bytes_to_string(result.weight_bytes)}; one replica serves "
             f"{result.capacity:.3g} requests/s when full (GPUs: tp x replicas for the rate)"]
    if slo:
        lines.append("SLO: " + ", ".join(f"{k} <= {_ms(v)}" for k, v in slo.items()))
    return "\n".join(lines) + "\n"


def _ms(seconds: float) -> str:
    if seconds != seconds:
        return "-"
    return f"{seconds * 1e3:.3g} ms" if seconds < 1 else f"{seconds:.3g} s"


def plot(result, path: str) -> None:
    """TTFT and TPOT percentiles against output tokens per second, one point per rate."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..report.plot import write_figure

    x = [p.output_tokens_per_s for p in result.points]
    figure, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, name in zip(axes, ("ttft", "tpot")):
        for q in ("p50", "p99"):
            ax.plot(x, [getattr(getattr(p, name), q) * 1e3 for p in result.points], marker="o", label=q)
        ax.set_xlabel("output tokens / s")
        ax.set_ylabel(f"{name.upper()} (ms)")
        ax.set_yscale("log")
        ax.grid(True, alpha=0.3)
        ax.legend()
    figure.suptitle(f"{result.model} on {result.tp} x {result.hardware}: rates "
                    + ", ".join(f"{p.rate:g}" for p in result.points) + " /s")
    figure.tight_layout()
    try:
        write_figure(figure, path)
    finally:
        plt.close(figure)
