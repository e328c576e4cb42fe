"""The ``flopcount`` command: ``flopcount MODEL``, ``flopcount models``, ``flopcount compare A B``."""

from __future__ import annotations

import json

import click

from .. import __version__, api
from . import check as check_gate
from . import compare as compare_view
from . import diff as diff_view
from . import progress, render
from . import serve as serve_view
from . import sweep as sweep_view
from .group import DEBUG_KEY, CliError, DefaultGroup
from .options import given, profile_options, run_options
from .phases import chosen_phase, phase_options, run_fit, run_phase
from .plan import PLAN_FORMATS, PLAN_ONLY, plan_options, refuse_mixed, run_plan, run_search

SORT_KEYS = ("macs", "flops", "params", "latency", "memory")
VIEWS = ("module", "op", "op-type")
CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}

MODEL_HELP = """\b
MODEL is one of:
  a zoo name            resnet50, bert_base, llama2_7b ... (see: flopcount models)
  an ONNX file          model.onnx
  a torch.export file   model.pt2 (written by torch.export.save)
  a Hugging Face folder path/to/folder with config.json (and *.safetensors)
  a native model file   model.safetensors (written by flopcount.runtime.save)
  FILE.py:FACTORY       a function in a Python file that returns a Module (flopcount or torch)
An existing path is that path even when the zoo has a model of that name (said in a note);
zoo:NAME is always the zoo's model.

FILE.py:FACTORY RUNS that Python file, exactly like `python FILE.py` would: use it only for
code you trust. Model files (.onnx, .pt2, folders, native) are only read; nothing in them is
executed, and pickled checkpoints (.pt, .pth, .bin from torch.save) are refused, never unpickled.
"""


def _check_needs(latency: bool, hardware, sort, fmt: str, plot_path, timeline: bool = False) -> None:
    """Options that need another one, refused before anything runs."""
    if timeline and fmt != "html":
        raise CliError(f"--timeline draws a timeline in the html page: add --format html (not {fmt})")
    if timeline and not latency:
        raise CliError("--timeline needs measured times: add --latency (this run would have none to draw)")
    if sort == "latency" and not latency:
        raise CliError("--sort latency needs measured times: add --latency")
    if fmt == "trace" and not (latency or hardware):
        raise CliError("--format trace is a timeline of measured times: add --latency (or --hardware NAME "
                       "to lay the ops out by their roofline estimate)")
    if plot_path is not None:
        from ..report.plot import check_path

        check_path(plot_path)
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise CliError("--plot needs matplotlib: pip install matplotlib") from None


def _start(ctx, debug: bool, output: str | None) -> None:
    ctx.meta[DEBUG_KEY] = debug
    if output is not None:
        render.check_output_path(output)


def _note(message: str, quiet: bool) -> None:
    if not quiet:
        click.echo(f"flopcount: {message}", err=True)


def _reporter(steps, quiet: bool):
    """The steps of a run for the progress bar; where no bar shows but stderr is a terminal
    (``flopcount m --latency | less``), the first kernel compilation is still said once there,
    so a first run is not seconds of silence. Scripts reading both streams get nothing extra."""
    told = []

    def say(step: str) -> None:
        steps.start(step)
        if step.startswith(api.COMPILING) and not steps.enabled and not told and progress.stderr_is_terminal():
            told.append(step)
            _note(api.COMPILING, quiet)

    return say


def _finish(text, output: str | None, quiet: bool) -> None:
    render.emit(text, output)
    if output is not None:
        _note(f"wrote {output}", quiet)


def listing_options(f):
    """The options of the commands that list a table (``models``, ``hardware``)."""
    for option in reversed([
        click.option("-f", "--format", "fmt", type=click.Choice(["table", "markdown", "json", "csv"]),
                     default="table", show_default=True),
        click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write to this file (atomically)."),
        click.option("-q", "--quiet", is_flag=True, help="No notes on stderr."),
        click.option("--debug", is_flag=True, help="Show the traceback of an error."),
    ]):
        f = option(f)
    return f


@click.group(cls=DefaultGroup, context_settings=CONTEXT)
@click.version_option(__version__, "-V", "--version", prog_name="flopcount", message="%(prog)s %(version)s")
def main() -> None:
    """What does a neural network cost? FLOPs, MACs, parameters, memory and latency, per layer and
    per op.

    \b
    Examples:
      flopcount resnet50                                 the module tree, 2 levels deep
      flopcount resnet50 --latency --sort latency        measured time per layer
      flopcount bert_base --by op-type                   cost per op type
      flopcount model.onnx -i input_ids=1x128            an ONNX file, symbolic dims bound
      flopcount net.py:build -i 1,3,32,32                a Module built by your own code
      flopcount resnet50 --format json -o cost.json      machine-readable, written atomically
      flopcount models                                   the model zoo
      flopcount compare resnet18 resnet50                two models side by side
      flopcount llama2_7b -i 1x1 --dtype bf16 --hardware h100-sxm   bf16 weights on an H100's roofline
      flopcount hardware                                 the hardware profiles
      flopcount gpt3_175b --plan dp=64,tp=8,pp=16 --global-batch 1536 --hardware h100-sxm
                                                         one training plan, per GPU
      flopcount plan llama2_7b --gpus 64 --hardware h100-sxm the fastest plans that fit

    Run 'flopcount profile --help' for every option of 'flopcount MODEL'.
    """


@main.command("profile", context_settings=CONTEXT, epilog=MODEL_HELP)
@click.argument("model")
@run_options
@click.option("-d", "--depth", type=click.IntRange(min=0), help="Module tree depth of the table  [default: 2]")
@click.option("--top", type=click.IntRange(min=1), help="Only the K most expensive layers (flat list).")
@click.option("--sort", type=click.Choice(SORT_KEYS), help="Order by this column, largest first.")
@click.option("--by", type=click.Choice(VIEWS), default="module", show_default=True,
              help="Rows: the module tree, every op, or one row per op type.")
@click.option("-f", "--format", "fmt", type=click.Choice(render.FORMATS), default="table", show_default=True,
              help="json, csv and trace (Chrome/Perfetto; needs --latency, or --hardware for a roofline "
                   "layout) hold every row and go to stdout clean; html is one self-contained page to "
                   "explore: module tree, op graph, roofline, timeline.")
@click.option("--timeline", is_flag=True,
              help="With --format html: insist on the timeline tab (needs --latency; a timed report has one anyway).")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), metavar="FILE.svg|png",
              help="Also draw the layers (MACs, params, latency) and a roofline of every op to this file "
                   "(needs matplotlib).")
@phase_options
@plan_options
@click.pass_context
def profile_command(ctx, model: str, depth, top, sort, by, fmt, timeline, plot_path, prefill, decode, context,
                    generate, moe_routing, kv_dtype, fit, plan_text, **kwargs) -> None:
    """Profile MODEL: its cost per layer, then the totals and the counting convention.

    This is also what 'flopcount MODEL' runs.

    \b
    Examples:
      flopcount resnet50
      flopcount resnet50 --depth 1 --batch 8
      flopcount resnet50 --top 5 --sort flops
      flopcount resnet50 --mode eager --convention ptflops
      flopcount resnet18 --latency --repeat 10 --warmup 2 --by op
      flopcount vit_b_16 --backward
      flopcount gpt2 -i 1x512 --format csv -o gpt2.csv
      flopcount resnet50 --latency --format trace -o trace.json   open in Perfetto or chrome://tracing
      flopcount resnet50 --hardware a100-80gb --format html -o resnet50.html   a page to explore
      flopcount model.onnx -i input_ids=1x128 -i attention_mask=1x128 --dtype int64
      flopcount ./net.py:make_model --factory-arg width=64 -i 1,3,32,32
      flopcount llama2_7b -i 1x1 --dtype bf16 --weights int4 --hardware h100-sxm
      flopcount resnet18 --latency --plot resnet18.svg
      flopcount llama2_7b --decode --context 2048 --dtype bf16 --hardware h100-sxm
      flopcount mixtral_8x7b --generate 2048:256 --dtype bf16 --batch 8
      flopcount ./Qwen3-30B-A3B --decode --context 4096 --batch 16 --moe-routing worst
      flopcount llama2_7b --fit --hardware h100-sxm --dtype bf16 --weights int4 --kv-dtype fp8
      flopcount gpt3_175b --plan dp=64,tp=8,pp=16 --micro-batch 1 --global-batch 1536 --zero 1 \\
          --sequence-parallel --recompute selective --hardware h100-sxm
      flopcount gpt2 --plan dp=8 --global-batch 64 --step-time 850ms --hardware a100-80gb
    """
    output, quiet = kwargs["output"], kwargs["quiet"]
    _start(ctx, kwargs["debug"], output)
    plan = {name: kwargs.pop(name) for name in PLAN_ONLY}
    refuse_mixed(ctx, given, planning=plan_text is not None)
    if timeline and (plan_text is not None or fit or chosen_phase(prefill, decode, context, generate) is not None):
        raise CliError("--timeline goes with a profile's html page, not with --plan, --fit or an LLM phase")
    if plan_text is not None:
        text = run_plan(model, plan_text, shapes=list(kwargs["input_shape"]), dtypes=kwargs["dtype"],
                        factory_args=kwargs["factory_args"], hardware=kwargs["hardware"], fmt=fmt, options=plan)
        _finish(text, output, quiet)
        return
    _check_needs(kwargs["latency"], kwargs["hardware"], sort, fmt, plot_path, timeline)
    options = profile_options(ctx, kwargs)
    if fit:
        if prefill is not None or decode or generate is not None:
            raise CliError("--fit sizes the cache for serving; it does not go with --prefill, --decode or --generate")
        _finish(run_fit(model, options, fmt, context=context, kv_dtype=kv_dtype), output, quiet)
        return
    phase = chosen_phase(prefill, decode, context, generate)
    if phase is not None:
        _finish(run_phase(model, phase, options, fmt, moe_routing=moe_routing, kv_dtype=kv_dtype), output, quiet)
        return
    if moe_routing is not None or kv_dtype is not None:
        raise CliError(f"{'--moe-routing' if moe_routing is not None else '--kv-dtype'} goes with an LLM phase "
                       f"(--prefill, --decode --context N, --generate PROMPT:NEW) or --fit")
    with progress.Steps(progress.wanted(quiet)) as steps:
        report = api.profile(model, progress=_reporter(steps, quiet), **options)
    for note in report.notes:
        _note(note, quiet)
    if depth is None and by == "module":
        depth = 2
    if plot_path is not None:
        report.plot(depth=1 if by != "module" else depth, top=top, path=plot_path)
        _note(f"wrote {plot_path}", quiet)
    if fmt == "table" and output is None and render.stdout_is_terminal():
        report.print(depth=depth, top=top, sort=sort, by=by)
        return
    _finish(render.report_pieces(report, fmt, depth=depth, top=top, sort=sort, by=by, timeline=timeline or None),
            output, quiet)


@main.command("check", context_settings=CONTEXT, epilog=MODEL_HELP)
@click.argument("model")
@run_options
@click.option("--budget", "budget_path", type=click.Path(dir_okay=False), metavar="FILE.toml",
              help="A TOML file with a [budget] table of limits: max-macs = \"4.2G\", max-peak-memory = \"120MB\" ...")
@check_gate.limit_options
@click.option("--baseline", type=click.Path(dir_okay=False), metavar="FILE.json",
              help="Fail when a metric grew beyond --tolerance from this earlier run (a file written by "
                   "--update, or a report from --format json).")
@click.option("--tolerance", default="0%", show_default=True, metavar="PERCENT",
              help="How much a metric may grow over the baseline: 1%, 0.5%.")
@click.option("--update", is_flag=True, help="Write this run's metrics to --baseline instead of comparing.")
@click.pass_context
def check_command(ctx, model: str, budget_path, baseline, tolerance, update, **kwargs) -> None:
    """Hold MODEL to a cost budget: exit 0 within it, 1 with one line per exceeded limit, 2 on
    bad input. For CI: counts and predicted bytes are exact, so the gate is never flaky.

    \b
    Examples:
      flopcount check resnet50 --max-macs 4.2G --max-params 26M --max-peak-memory 120MB
      flopcount check resnet50 --budget budget.toml
      flopcount check ./model.onnx --baseline cost.json --tolerance 1%
      flopcount check ./model.onnx --baseline cost.json --update     write the new baseline
    """
    limits = {name: kwargs.pop(name) for name in list(kwargs) if name.startswith("max_")}
    _start(ctx, kwargs["debug"], kwargs["output"])
    if kwargs["output"] is not None:
        raise CliError("flopcount check prints its verdict; write a baseline with --baseline FILE --update")
    budget, baseline_values, fraction = check_gate.check_request(budget_path, baseline, tolerance, update, limits)
    options = profile_options(ctx, kwargs)
    with progress.Steps(progress.wanted(kwargs["quiet"])) as steps:
        report = api.profile(model, progress=_reporter(steps, kwargs["quiet"]), **options)
    ctx.exit(check_gate.run_check(report, budget, baseline_values, fraction, baseline if update else None,
                                  kwargs["quiet"]))


@main.command("sweep", context_settings=CONTEXT, epilog=MODEL_HELP)
@click.argument("models", nargs=-1, required=True, metavar="MODEL...")
@sweep_view.sweep_options
@click.pass_context
def sweep_command(ctx, models: tuple, **options) -> None:
    """Profile every combination of MODELs (names, files, folders, or a .txt file listing them)
    and the values of the axes: one row of totals per cell.

    Rows go to --output as cells finish (CSV, JSON lines or Parquet) and a re-run resumes the
    file; a cell that fails records its error and the sweep goes on. Cells run here, on
    --workers N local processes, or as --ray tasks on a Ray cluster.

    \b
    Examples:
      flopcount sweep resnet18 resnet50 vit_b_16 --batch 1,8,32 -o cost.csv
      flopcount sweep bert_base gpt2 --seq 128,512,1024 --plot seq.svg
      flopcount sweep models.txt --resolution 224,320,448 --workers 2 -o hub.parquet
      flopcount sweep llama2_7b mistral_7b --phase decode --seq 1024,4096,16384 --batch 1,16 \\
          --dtype bf16 --hardware h100-sxm,a100-80gb -o serving.jsonl
      flopcount sweep model.onnx -i input_ids=1x{seq} --seq 64,128,256 --ray auto -o cost.csv
    """
    ctx.meta[DEBUG_KEY] = options["debug"]
    sweep_view.run_sweep(models, options)


@main.command("serve", context_settings=CONTEXT, epilog=MODEL_HELP)
@click.argument("model")
@serve_view.serve_options
@click.pass_context
def serve_command(ctx, model: str, hardware, rates, prompt, output_lengths, dtype, tp, max_batch, max_tokens_per_step,
                  block_size, prefix_hit, spec, duration, slo, seed, fmt, plot_path, output, quiet, debug) -> None:
    """Simulate MODEL served at request rates: a continuous-batching server (chunked prefill,
    paged KV blocks with admission and preemption, prefix caching, speculative decoding) whose
    step times come from the model's traced steps on --hardware's roofline.

    \b
    Examples:
      flopcount serve llama2_7b --hardware h100-sxm --dtype bf16 --rate 1,4,16,32
      flopcount serve llama3_8b --hardware a100-80gb --dtype bf16 --rate 8 --prompt uniform:128:4096 \\
          --output lognormal:200:0.8 --slo ttft=500ms,tpot=50ms --prefix-hit 0.3
      flopcount serve llama2_7b --hardware h100-sxm --dtype bf16 --rate 4 --spec llama:4:0.7
      flopcount serve ./Qwen3-30B-A3B --hardware h100-sxm --tp 2 --rate 1,2,4,8 --plot curve.svg
    """
    from .. import serving

    _start(ctx, debug, output)
    if plot_path is not None:
        _check_needs(False, None, None, "table", plot_path)
    objectives = serve_view.parse_slo(slo)
    with progress.Steps(progress.wanted(quiet)) as steps:
        steps.start("tracing the model's steps")
        result = serving.serve(model, hardware, rates=rates, prompt=prompt, output=output_lengths, duration=duration,
                               dtype=dtype, tp=tp, max_batch=max_batch, max_tokens_per_step=max_tokens_per_step,
                               block_size=block_size, prefix_hit=prefix_hit, spec=spec, slo=objectives, seed=seed,
                               progress=lambda i, n: steps.start(f"tracing the model's steps ({i + 1}/{n})"))
    for note in result.notes:
        _note(note, quiet)
    if plot_path is not None:
        serve_view.plot(result, plot_path)
        _note(f"wrote {plot_path}", quiet)
    _finish(serve_view.render(result, fmt), output, quiet)


@main.command("calibrate", context_settings=CONTEXT)
@click.option("--engine", type=click.Choice(["flopcount", "torch", "onnxruntime"]), default="flopcount",
              show_default=True, help="Who runs the ops: flopcount's runtime, PyTorch (pip install torch), or "
                                      "onnxruntime on the suite's ONNX exports (pip install onnxruntime).")
@click.option("--device", default="cpu", show_default=True, metavar="cpu|cuda[:N]", help="The device to calibrate.")
@click.option("--dtype", type=click.Choice(["float32", "float16", "bfloat16"]), default="float32", show_default=True,
              help="The dtype of every case (a profile per dtype: saved as BASE-ENGINE-DTYPE).")
@click.option("--base", metavar="NAME",
              help="The datasheet profile the curves are read against.  [default: cpu measured here; on a GPU "
                   "the one its name says]")
@click.option("--quick", is_flag=True, help="Half the sizes (a few seconds; for a first look).")
@click.option("--repeat", type=click.IntRange(min=1), default=5, show_default=True, help="Timed runs per case.")
@click.option("--rounds", type=click.IntRange(min=1), default=3, show_default=True,
              help="Passes over the whole suite; an op's figure is its fastest run in each pass, the median "
                   "over passes.")
@click.option("--threads", type=click.IntRange(min=1),
              help="Threads of every case (time models with the same --threads).  [default: the cores free now]")
@click.option("--name", metavar="NAME",
              help="Save as NAME (--hardware NAME).  [default: BASE-ENGINE, then -DTYPE unless float32]")
@click.option("-o", "--output", type=click.Path(dir_okay=False), metavar="FILE.json",
              help="Save to this file instead of the cache folder (--hardware FILE.json).")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar and no notes on stderr.")
@click.option("--debug", is_flag=True, help="Show the traceback of an error.")
@click.pass_context
def calibrate_command(ctx, engine, device, dtype, base, quick, repeat, rounds, threads, name, output, quiet,
                      debug) -> None:
    """Time a suite of ops (GEMMs, convolutions, attention, elementwise, norms, reductions,
    pooling) at several sizes on ENGINE and save a calibrated hardware profile: --hardware NAME
    then predicts every op's time from these measurements, beside its roofline.

    \b
    Examples:
      flopcount calibrate                                  saved as cpu-flopcount
      flopcount resnet50 --hardware cpu-flopcount --latency  predicted beside measured
      flopcount calibrate --engine torch                   saved as cpu-torch
      flopcount calibrate --engine onnxruntime             saved as cpu-onnxruntime
      flopcount calibrate --device cuda --engine torch --dtype bfloat16   on an H100: h100-sxm-torch-bfloat16
    """
    from .. import calibrate as calibration

    _start(ctx, debug, output)
    with progress.Steps(progress.wanted(quiet), delay=0) as steps:
        profile = calibration.calibrate(
            engine=engine, device=device, dtype=dtype, base=base, quick=quick, repeat=repeat, rounds=rounds,
            threads=threads,
            progress=lambda i, n, label: steps.start(f"calibrating {label} ({i + 1}/{n})"))
    if name is not None:
        profile = profile.with_(name=name)
    path = output or calibration.default_path(profile.name)
    calibration.save(profile, path)
    width = max((len(kind) for kind in profile.curves), default=0)
    for kind, curve in sorted(profile.curves.items()):
        shares = [r / m for r, m in curve if r > 0]
        reach = f"{min(shares):.0%} to {max(shares):.0%} of the roofline" if shares else "no roofline time"
        click.echo(f"{kind:{width}s} {len(curve):3d} sizes, {reach}")
    click.echo(f"wrote {path}: use --hardware {profile.name if output is None else path}")


@main.command("compare", context_settings=CONTEXT, epilog=MODEL_HELP)
@click.argument("model_a", metavar="A")
@click.argument("model_b", metavar="[B]", required=False)
@run_options
@click.option("--input-shape-a", "shapes_a", multiple=True, metavar="[NAME=]SHAPE",
              help="Input shape for A only (as --input-shape).")
@click.option("--input-shape-b", "shapes_b", multiple=True, metavar="[NAME=]SHAPE",
              help="Input shape for B only; with no B, B is A on this input.")
@click.option("-d", "--depth", type=click.IntRange(min=0), default=1, show_default=True,
              help="Depth of the per-module comparison (modules both models have).")
@click.option("-f", "--format", "fmt", type=click.Choice(["table", "markdown", "json", "csv"]), default="table",
              show_default=True)
@click.pass_context
def compare_command(ctx, model_a: str, model_b, shapes_a, shapes_b, depth, fmt, **kwargs) -> None:
    """Compare two models, or one model on two inputs, side by side (B / A ratios).

    --input-shape applies to both sides; --input-shape-a and --input-shape-b to one.

    \b
    Examples:
      flopcount compare resnet18 resnet50
      flopcount compare resnet50 --input-shape-b 1x3x448x448   one model, two input sizes
      flopcount compare bert_base gpt2 -i 1x256 --format markdown
      flopcount compare a.onnx b.onnx --latency
    """
    output, quiet = kwargs["output"], kwargs["quiet"]
    _start(ctx, kwargs["debug"], output)
    if model_b is None:
        if not shapes_b:
            raise CliError("compare needs two models (compare A B), or one model and --input-shape-b "
                           "(compare A --input-shape-b 1x3x448x448)")
        model_b = model_a
    options_a = profile_options(ctx, {**kwargs, "input_shape": kwargs["input_shape"] + shapes_a})
    options_b = profile_options(ctx, {**kwargs, "input_shape": kwargs["input_shape"] + shapes_b})
    with progress.Steps(progress.wanted(quiet)) as steps:
        a = api.profile(model_a, progress=_reporter(steps, quiet), **options_a)
        b = api.profile(model_b, progress=_reporter(steps, quiet), **options_b)
    if fmt == "table" and output is None and render.stdout_is_terminal():
        render.print_rich(compare_view.render(a, b, "rich", depth))
        return
    _finish(compare_view.render(a, b, fmt, depth), output, quiet)


@main.command("plan", context_settings=CONTEXT, epilog=MODEL_HELP)
@click.argument("model")
@click.option("--gpus", type=click.IntRange(min=1), help="GPUs to split the step over (required).")
@click.option("--hardware", metavar="NAME", help="The GPUs' profile, for memory and bandwidths (required; "
              "flopcount hardware lists them).")
@click.option("--global-batch", type=click.IntRange(min=1), help="Samples per training step (default: one per GPU).")
@click.option("-i", "--input-shape", "input_shapes", multiple=True, metavar="SHAPE",
              help="Input shape, batch included (the plan sets the batch): 1x2048. Default: the zoo's input.")
@click.option("--dtype", "dtypes", multiple=True, metavar="DTYPE",
              help="Training dtype (default bf16: mixed-precision Adam); an integer one is the input's.")
@click.option("--factory-arg", "factory_args", multiple=True, metavar="KEY=VALUE",
              help="Keyword argument for FILE.py:FACTORY (a Python literal or else a string).")
@click.option("--top", type=click.IntRange(min=1), default=5, show_default=True, help="How many plans to show.")
@click.option("--attention", type=click.Choice(["full", "half"]), default="full", show_default=True,
              help="Count attention's contractions whole in model FLOPs (PaLM), or half (causal).")
@click.option("-f", "--format", "fmt", type=click.Choice(PLAN_FORMATS), default="table", show_default=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write to this file (atomically).")
@click.option("-q", "--quiet", is_flag=True, help="No notes on stderr.")
@click.option("--debug", is_flag=True, help="Show the traceback of an error.")
@click.pass_context
def plan_command(ctx, model: str, gpus, hardware, global_batch, input_shapes, dtypes, factory_args, top, attention,
                 fmt, output, quiet, debug) -> None:
    """Search the training plans of MODEL on --gpus GPUs that fit in memory, fastest first.

    Every data x tensor x pipeline split (tensor parallel within a node), micro-batch, ZeRO
    stage, recomputation and sequence parallelism is priced; the best few are estimated exactly
    (see 'flopcount MODEL --plan' for one of them in full).

    \b
    Examples:
      flopcount plan gpt3_175b --gpus 512 --hardware h100-sxm --global-batch 1536
      flopcount plan gpt2 --gpus 8 --hardware a100-80gb --top 3 --format json
    """
    _start(ctx, debug, output)
    if gpus is None or hardware is None:
        raise CliError("flopcount plan needs --gpus N and --hardware NAME (flopcount hardware lists them)")
    text = run_search(model, gpus, shapes=list(input_shapes), dtypes=list(dtypes), factory_args=list(factory_args),
                      hardware=hardware, global_batch=global_batch, top=top, attention=attention, fmt=fmt)
    _finish(text, output, quiet)


@main.command("diff", context_settings=CONTEXT, epilog=MODEL_HELP)
@click.argument("model_a", metavar="A")
@click.argument("model_b", metavar="B")
@run_options
@click.option("--by", type=click.Choice(["layer", "op"]), default="layer", show_default=True,
              help="Compare the module tree's layers, or every op.")
@click.option("--all", "every", is_flag=True, help="Also list the rows that did not change.")
@click.option("-f", "--format", "fmt", type=click.Choice(diff_view.FORMATS), default="table", show_default=True)
@click.pass_context
def diff_command(ctx, model_a: str, model_b: str, by, every, fmt, **kwargs) -> None:
    """What changed from A to B, layer by layer (or op by op): added, removed and changed rows
    with the change in MACs, params, bytes and latency, then the totals.

    Rows are matched by module path (ops: by scope and op type), then what is left by position
    and type. 'compare' shows the totals side by side instead.

    \b
    Examples:
      flopcount diff model.onnx model_qdq.onnx --by op     float against quantized
      flopcount diff resnet50 resnet101                     the layers one adds
      flopcount diff a.onnx b.onnx --latency --format json
      flopcount diff resnet50 resnet101 --format html -o diff.html   the two trees side by side
    """
    from ..report.diff import diff

    output, quiet = kwargs["output"], kwargs["quiet"]
    _start(ctx, kwargs["debug"], output)
    options = profile_options(ctx, kwargs)
    with progress.Steps(progress.wanted(quiet)) as steps:
        a = api.profile(model_a, progress=_reporter(steps, quiet), **options)
        b = api.profile(model_b, progress=_reporter(steps, quiet), **options)
    result = diff(a, b, by=by)
    if fmt == "table" and output is None and render.stdout_is_terminal():
        render.print_rich(diff_view.render(result, fmt, every, rich=True))
        return
    _finish(diff_view.render(result, fmt, every), output, quiet)


def _zoo_inputs(entry) -> list:
    return [{"name": name, "shape": [1, *shape], "dtype": dtype} for name, shape, dtype, _ in entry.inputs]


def _inputs_text(inputs: list) -> str:
    from ..inputs import format_shape

    return ", ".join(format_shape(i["shape"]) + ("" if i["dtype"] == "float32" else f" {i['dtype']}") for i in inputs)


@main.command("models", context_settings=CONTEXT)
@listing_options
@click.pass_context
def models_command(ctx, fmt: str, output, quiet: bool, debug: bool) -> None:
    """List the model zoo: names, default inputs and parameter counts.

    Any name here is a MODEL for 'flopcount MODEL'.

    \b
    Examples:
      flopcount models
      flopcount models --format json
    """
    from ..report.units import params_to_string

    from .. import models

    _start(ctx, debug, output)
    entries = [models.info(name) for name in models.names()]
    if fmt == "json":
        doc = [{"name": e.name, "family": e.family, "inputs": _zoo_inputs(e), "params": e.params,
                "description": e.description} for e in entries]
        _finish(json.dumps(doc, indent=2) + "\n", output, quiet)
        return
    if fmt == "csv":
        headers = ["name", "family", "default_input", "params", "description"]
        body = [[e.name, e.family, _inputs_text(_zoo_inputs(e)), e.params, e.description] for e in entries]
    else:
        headers = ["Model", "Family", "Default input", "Params", "Description"]
        body = [[e.name, e.family, _inputs_text(_zoo_inputs(e)),
                 "-" if e.params is None else params_to_string(e.params), e.description] for e in entries]
    footer = [f"{len(entries)} models; profile one with: flopcount NAME"]
    if fmt == "table" and output is None and render.stdout_is_terminal():
        render.print_rich(render.rich_table(headers, body, title="flopcount model zoo", footer=footer))
        return
    _finish(render.rows_text(headers, body, fmt, title="flopcount model zoo", footer=footer), output, quiet)


def _tera(profile, key: str) -> str:
    value = profile.peak_flops.get(key)
    return "-" if value is None else f"{value / 1e12:g}"


@main.command("hardware", context_settings=CONTEXT)
@listing_options
@click.pass_context
def hardware_command(ctx, fmt: str, output, quiet: bool, debug: bool) -> None:
    """List the hardware profiles for --hardware: dense peaks, memory and links (datasheet figures).

    \b
    Examples:
      flopcount hardware
      flopcount llama2_7b -i 1x1 --dtype bf16 --hardware h100-sxm
    """
    from .. import hardware

    _start(ctx, debug, output)
    profiles = [hardware.get(name) for name in hardware.names() if name != "cpu"]
    footer = ["peaks are dense (a vendor's figure with sparsity, halved); links per device and direction",
              "cpu: this machine, measured by a short GEMM and copy benchmark when --hardware cpu is given"]
    if fmt == "json":
        _finish(json.dumps([p.to_dict() for p in profiles], indent=2) + "\n", output, quiet)
        return
    headers = ["Name", "Device", "BF16 TFLOP/s", "FP8 TFLOP/s", "FP32 TFLOP/s", "Memory GB", "Bandwidth TB/s",
               "Link GB/s", "Per node"]
    body = [[p.name, p.title, _tera(p, "bfloat16"), _tera(p, "float8"), _tera(p, "float32"),
             f"{p.memory_bytes / 1e9:g}", f"{p.memory_bandwidth / 1e12:g}", f"{p.intra_node_bandwidth / 1e9:g}",
             p.devices_per_node] for p in profiles]
    if fmt == "table" and output is None and render.stdout_is_terminal():
        render.print_rich(render.rich_table(headers, body, title="flopcount hardware", footer=footer))
        return
    _finish(render.rows_text(headers, body, fmt, title="flopcount hardware", footer=footer), output, quiet)


__all__ = ["main"]
