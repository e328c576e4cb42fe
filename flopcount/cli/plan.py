"""Training plans on the command line: ``flopcount MODEL --plan dp=64,tp=8,pp=16 ...`` prices one
plan per rank, ``flopcount plan MODEL --gpus 512 --hardware h100-sxm`` searches the plans that fit.

The options are those of ``flopcount.parallel.Plan``, ``estimate`` and ``search`` under the same
names; this module only reads them as text and hands them over. ``--hardware`` and ``--dtype``
are the profiling options' own: a floating ``--dtype`` is the training dtype (default bfloat16),
an integer one the input's (for FILE.py:FACTORY).
"""

from __future__ import annotations

import json
import re

import click

from ..runtime.dtypes import get_dtype
from ..runtime.errors import FlopcountError, ShapeError
from .inputs import parse_dtype, parse_factory_arg, parse_shape

RECOMPUTE = ("none", "selective", "full")
PLAN_FORMATS = ("table", "json", "html")
# the options only a training plan takes (``flopcount MODEL`` refuses them without --plan)
PLAN_ONLY = ("micro_batch", "global_batch", "zero", "sequence_parallel", "recompute", "step_time", "attention")
# the profiling options a plan has no use for (``flopcount MODEL --plan`` refuses them)
PROFILE_ONLY = ("batch", "mode", "device", "latency", "repeat", "warmup", "backward", "convention", "strict",
                "weights", "depth", "top", "sort", "by", "prefill", "decode", "context", "generate")


def plan_options(func):
    """The options of one training plan (``flopcount MODEL --plan``)."""
    options = [
        click.option("--plan", "plan_text", metavar="dp=N,tp=N,pp=N",
                     help="Price a training plan per rank instead of profiling: data, tensor and pipeline "
                          "parallel sizes (those left out are 1). --dtype sets its precision (default bf16)."),
        click.option("--micro-batch", type=click.IntRange(min=1), default=1, show_default=True,
                     help="Plan: samples per data-parallel rank and micro-batch."),
        click.option("--global-batch", type=click.IntRange(min=1),
                     help="Plan: samples per training step (default: dp x micro-batch)."),
        click.option("--zero", type=click.IntRange(0, 3), default=0, show_default=True,
                     help="Plan: ZeRO stage (1 optimizer state, 2 + gradients, 3 + weights partitioned)."),
        click.option("--sequence-parallel", is_flag=True,
                     help="Plan: Megatron's sequence parallelism on the tensor-parallel ranks."),
        click.option("--recompute", type=click.Choice(RECOMPUTE), default="none", show_default=True,
                     help="Plan: activation recomputation (selective: attention scores; full: every layer)."),
        click.option("--step-time", metavar="SECONDS",
                     help="Plan: a measured step time (14.2s, 850ms) for MFU and HFU instead of the estimate."),
        click.option("--attention", type=click.Choice(["full", "half"]), default="full", show_default=True,
                     help="Plan: count attention's contractions whole in model FLOPs (PaLM), or half (causal)."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def parse_seconds(text: str | None) -> float | None:
    """``'14.2s'``, ``'850ms'``, ``'2min'`` or ``'14.2'`` -> seconds."""
    if text is None:
        return None
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(s|ms|min)?\s*", text)
    if m is None or float(m.group(1)) <= 0:
        raise ShapeError(f"--step-time {text!r}: expected a positive time such as 14.2s or 850ms")
    return float(m.group(1)) * {"ms": 1e-3, "min": 60.0}.get(m.group(2), 1.0)


def split_dtypes(dtypes) -> tuple:
    """(training dtype, input dtype) from ``--dtype`` texts: a floating one trains, an integer one
    is the input's; a plan trains in bfloat16 unless told."""
    parsed = [d for _, d in (parse_dtype(t) for t in dtypes)]
    floating = [d for d in parsed if get_dtype(d).is_floating_point]
    integer = [d for d in parsed if not get_dtype(d).is_floating_point]
    return (floating[-1] if floating else "bfloat16"), (integer[-1] if integer else None)


def plan_target(spec: str, shapes, factory_args) -> tuple:
    """(model for ``parallel.estimate``, one sample's shape or None). A zoo name is built by
    ``estimate`` on the meta device; FILE.py:FACTORY builds a Module there."""
    from .. import loading
    from .. import runtime as rt
    from ..runtime.nn import Module

    given = [parse_shape(s) for s in shapes]
    if len(given) > 1:
        raise ShapeError("a plan takes models of one input: give one --input-shape")
    sample = tuple(given[0][1][1:]) if given else None
    if given and not sample:
        raise ShapeError(f"--input-shape {shapes[0]!r}: a plan needs the batch dim and one more")
    if loading.kind_of(spec) == loading.ZOO:
        return loading.zoo_name(spec), sample
    with rt.meta():
        target = loading.load(spec, "meta", zoo_device="meta",
                              factory_args=dict(parse_factory_arg(a) for a in factory_args))
    if not isinstance(target.model, Module):
        raise FlopcountError(f"{spec}: a plan trains a model's parameters; give a zoo name or FILE.py:FACTORY "
                             f"(a Module), not a model file")
    if sample is None:
        raise ShapeError(f"{spec}: give --input-shape (batch included; the plan sets the batch)")
    return target.model, sample


def _check_format(fmt: str) -> None:
    if fmt not in PLAN_FORMATS:
        raise FlopcountError(f"--format {fmt}: a plan prints as table, json or html")


def _formatted(report_or_result, doc: dict, fmt: str, title: str = "flopcount training plans") -> str:
    if fmt == "html":
        from ..report.page import document_page

        return document_page("plan", doc, title)
    return json.dumps(doc, indent=2) + "\n" if fmt == "json" else str(report_or_result) + "\n"


def run_plan(model: str, plan_text: str, *, shapes, dtypes, factory_args, hardware, fmt: str, options: dict) -> str:
    """The text ``flopcount MODEL --plan ...`` prints."""
    from .. import parallel

    _check_format(fmt)
    target, sample = plan_target(model, shapes, factory_args)
    dtype, input_dtype = split_dtypes(dtypes)
    seconds = parse_seconds(options["step_time"])
    plan = parallel.Plan.parse(plan_text, micro_batch=options["micro_batch"], global_batch=options["global_batch"],
                               zero=options["zero"], sequence_parallel=options["sequence_parallel"],
                               recompute=options["recompute"], dtype=dtype)
    report = parallel.estimate(target, plan, input_shape=sample, input_dtype=input_dtype, hardware=hardware,
                               step_time=seconds, attention=options["attention"])
    return _formatted(report, report.to_dict(), fmt, f"{model}, {plan_text}: flopcount training plan")


def run_search(model: str, gpus: int, *, shapes, dtypes, factory_args, hardware, global_batch, top: int,
               attention: str, fmt: str) -> str:
    """The text ``flopcount plan MODEL --gpus N --hardware NAME`` prints."""
    from .. import parallel

    _check_format(fmt)
    target, sample = plan_target(model, shapes, factory_args)
    dtype, input_dtype = split_dtypes(dtypes)
    result = parallel.search(target, gpus, hardware=hardware, global_batch=global_batch, input_shape=sample,
                             input_dtype=input_dtype, dtype=dtype, top=top, attention=attention)
    doc = {"model": result.model, "gpus": result.gpus, "global_batch": result.global_batch,
           "considered": result.considered, "fitting": result.fitting, "skipped": result.skipped,
           "best": [r.to_dict() for r in result.best]}
    return _formatted(result, doc, fmt)


def refuse_mixed(ctx: click.Context, given, planning: bool) -> None:
    """One line naming the options that do not go with (or need) ``--plan``."""
    if planning:
        named = [f"--{name.replace('_', '-')}" for name in PROFILE_ONLY if given(ctx, name)]
        if named:
            raise FlopcountError(f"{', '.join(named)}: only for profiling, not with --plan")
        return
    named = [f"--{name.replace('_', '-')}" for name in PLAN_ONLY if given(ctx, name)]
    if named:
        raise FlopcountError(f"{', '.join(named)}: only for a training plan; add --plan dp=N,tp=N,pp=N")
