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
                     help="LLM phase: one forward over a prompt of TOKENS tokens (a zoo decoder)."),
        click.option("--decode", is_flag=True,
                     help="LLM phase: one new token per sequence on a KV cache of --context positions."),
        click.option("--context", type=click.IntRange(min=0), metavar="TOKENS",
                     help="The cached positions a --decode step attends to."),
        click.option("--generate", metavar="PROMPT:NEW",
                     help="LLM phase: a prefill of PROMPT tokens, then NEW decode steps, summed exactly."),
    ]):
        f = option(f)
    return f


def chosen_phase(prefill, decode, context, generate):
    """The phase the options name, or None when none is given."""
    from .. import llm

    return llm.parse_phase(prefill=prefill, decode=decode, context=context, generate=generate)


def run_phase(model: str, phase, options: dict, fmt: str) -> str:
    """The text of the phase's report, in ``fmt``, from ``profile()``'s options as the command
    line gave them; one-line errors for the options a phase does not take."""
    from .. import llm
    from ..loading import split_dtype

    refused = [flag for flag, given in (("--input-shape", options["input_shape"] is not None),
                                        ("--latency", options["latency"]), ("--backward", options["backward"]),
                                        ("--weights", options["weights"] is not None),
                                        ("--mode", options["mode"] != "graph"))
               if given]
    if refused:
        raise FlopcountError(f"{refused[0]} does not apply to an LLM phase (--prefill, --decode, --generate): "
                             f"the phase sets the inputs and is counted on the traced decoder")
    if fmt not in FORMATS and fmt != "json":
        raise FlopcountError(f"--format {fmt} is not available for an LLM phase; use table, markdown or json")
    dtype, input_dtypes = split_dtype(options["dtype"])
    if input_dtypes:
        raise FlopcountError(f"--dtype {input_dtypes[0][1]} names an input dtype; an LLM phase takes the model's "
                             f"floating dtype (--dtype bf16)")
    report = llm.profile(model, phase, batch=options["batch"] or 1, dtype=dtype, hardware=options["hardware"])
    if fmt == "json":
        return json.dumps(report.to_dict(), indent=2) + "\n"
    return report.table(FORMATS[fmt]).rstrip("\n") + "\n"


__all__ = ["phase_options", "chosen_phase", "run_phase"]
