"""``flopcount MODEL --prefill N | --decode --context N | --generate PROMPT:NEW``: a decoder's
LLM inference phases, traced (``flopcount.llm``) rather than profiled as one forward."""

from __future__ import annotations

import json

import click

from ..runtime.errors import FlopcountError

FORMATS = {"table": "simple", "markdown": "github"}  # tabulate's names for the text table


def phase_options(f):
    """The phase options of ``flopcount MODEL``."""
    for option in reversed([
        click.option("--prefill", type=click.IntRange(min=1), metavar="TOKENS",
                     help="LLM phase: one forward over a prompt of TOKENS tokens (any causal LM: a zoo "
                          "decoder, a Hugging Face folder, with weights or config.json alone)."),
        click.option("--decode", is_flag=True,
                     help="LLM phase: one new token per sequence on a KV cache of --context positions."),
        click.option("--context", type=click.IntRange(min=0), metavar="TOKENS",
                     help="The cached positions a --decode step attends to."),
        click.option("--generate", metavar="PROMPT:NEW",
                     help="LLM phase: NEW tokens generated after a prompt of PROMPT tokens (the prefill, then "
                          "NEW - 1 decode steps), summed exactly."),
        click.option("--moe-routing", type=click.Choice(["balanced", "worst", "real"]), default=None,
                     help="LLM phase of a mixture of experts: which experts each token goes to. balanced (the "
                          "default): evenly spread; worst: every token on the same k experts; real: the router's "
                          "own choice, running the model with its weights."),
        click.option("--kv-dtype", metavar="DTYPE",
                     help="LLM phase or --fit: the KV cache's dtype (fp8, bf16...); the model's by default."),
        click.option("--fit", "fit", is_flag=True,
                     help="The longest context (at --batch) and the largest batch (at --context, or the model's "
                          "longest) whose weights (--weights, --dtype) and KV cache fit on --hardware."),
    ]):
        f = option(f)
    return f


def chosen_phase(prefill, decode, context, generate):
    """The phase the options name, or None when none is given."""
    from .. import llm

    return llm.parse_phase(prefill=prefill, decode=decode, context=context, generate=generate)


def _refuse(options: dict, flags: list, what: str) -> None:
    refused = [flag for flag, name, default in flags if options.get(name, default) != default]
    if refused:
        raise FlopcountError(f"{refused[0]} does not apply to {what}")


def run_phase(model: str, phase, options: dict, fmt: str, moe_routing=None, kv_dtype=None) -> str:
    """The text of the phase's report, in ``fmt``, from ``profile()``'s options as the command
    line gave them; one-line errors for the options a phase does not take."""
    from .. import llm

    _refuse(options, [("--input-shape", "input_shape", None), ("--latency", "latency", False),
                      ("--backward", "backward", False), ("--weights", "weights", None), ("--mode", "mode", "graph")],
            "an LLM phase (--prefill, --decode, --generate): the phase sets the inputs and is counted on the traced "
            "decoder")
    _check_format(fmt, "an LLM phase", html=True)
    dtype = _model_dtype(options)
    report = llm.profile(model, phase, batch=options["batch"] or 1, dtype=dtype, hardware=options["hardware"],
                         moe_routing=moe_routing or "balanced", kv_dtype=_dtype_name(kv_dtype))
    if fmt == "json":
        return json.dumps(report.to_dict(), indent=2) + "\n"
    if fmt == "html":
        from ..report.page import document_page

        return document_page("phase", report.to_dict(), f"{report.model}, {report.phase}: flopcount LLM phase")
    return report.table(FORMATS[fmt]).rstrip("\n") + "\n"


def run_fit(model: str, options: dict, fmt: str, context=None, kv_dtype=None) -> str:
    """``--fit``: the longest context and largest batch on ``--hardware``."""
    from .. import llm
    from ..llm.capacity import render_fit

    if options["hardware"] is None:
        raise FlopcountError("--fit needs --hardware NAME (flopcount hardware lists them)")
    _refuse(options, [("--input-shape", "input_shape", None), ("--latency", "latency", False),
                      ("--backward", "backward", False), ("--mode", "mode", "graph")],
            "--fit: it sizes the weights and the KV cache, not one forward")
    _check_format(fmt, "--fit")
    result = llm.fit(model, options["hardware"], dtype=_model_dtype(options), weights=options["weights"],
                     kv_dtype=_dtype_name(kv_dtype), batch=options["batch"] or 1, context=context)
    if fmt == "json":
        return json.dumps(result.to_dict(), indent=2) + "\n"
    label = model if isinstance(model, str) else type(model).__name__
    return render_fit(result, label) + "\n"


def _check_format(fmt: str, what: str, html: bool = False) -> None:
    if fmt not in FORMATS and fmt != "json" and not (html and fmt == "html"):
        choices = "table, markdown, json or html" if html else "table, markdown or json"
        raise FlopcountError(f"--format {fmt} is not available for {what}; use {choices}")


def _model_dtype(options: dict):
    from ..loading import split_dtype

    dtype, input_dtypes = split_dtype(options["dtype"])
    if input_dtypes:
        raise FlopcountError(f"--dtype {input_dtypes[0][1]} names an input dtype; an LLM phase takes the model's "
                             f"floating dtype (--dtype bf16)")
    return dtype


def _dtype_name(text):
    """``--kv-dtype``'s value as a runtime dtype (``fp8`` is float8_e4m3fn), or None."""
    if text is None:
        return None
    from .. import runtime as rt

    try:
        return rt.get_dtype(text.lower())
    except TypeError:
        raise FlopcountError(f"--kv-dtype: unknown dtype {text!r} (fp8, bf16, fp16, float32...)") from None


__all__ = ["phase_options", "chosen_phase", "run_phase", "run_fit"]
