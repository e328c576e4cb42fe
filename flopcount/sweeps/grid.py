"""A sweep's grid: every combination of models, inputs, dtypes, weights, hardware and phases,
as cells in a fixed order. A cell's ``key`` names what it computes, so a re-run recognizes the
cells an earlier, interrupted run already wrote.

    >>> cells = grid(["resnet18", "resnet50"], batch=[1, 8])
    >>> [(c.model, c.batch) for c in cells]
    [('resnet18', 1), ('resnet18', 8), ('resnet50', 1), ('resnet50', 8)]
"""

from __future__ import annotations

import itertools
import os
import re
from dataclasses import asdict, dataclass

from ..runtime.errors import FlopcountError

PHASES = ("forward", "prefill", "decode", "train")   # train: a training plan's step (a plan cell)
AXES = ("batch", "seq", "resolution")          # the numeric axes, in the order cells vary
PLACEHOLDER = re.compile(r"\{(batch|seq|resolution)\}")


class SweepError(FlopcountError):
    """A sweep that cannot start: an empty axis, a bad value, an unreadable list of models."""


@dataclass(frozen=True)
class Cell:
    """One ``profile()`` (or LLM phase) of a sweep: what it runs and where it sits in the grid."""

    index: int
    model: str
    phase: str = "forward"
    batch: int | None = None
    seq: int | None = None
    resolution: int | None = None
    input_shape: tuple = ()        # -i templates, {batch} {seq} {resolution} filled in by the cell
    dtype: str | None = None
    weights: str | None = None
    hardware: str | None = None
    plan: str | None = None        # dp=8,tp=2...: the cell prices one training step on that plan

    @property
    def key(self) -> str:
        """What the cell computes, in words: equal keys, equal rows."""
        fields = asdict(self)
        fields.pop("index")
        fields["input_shape"] = ";".join(self.input_shape)
        return "|".join(f"{k}={'' if v is None else v}" for k, v in fields.items())


def _values(name: str, values) -> list:
    values = list(values) if values is not None else []
    if not values:
        return [None]
    if len(set(values)) != len(values):
        raise SweepError(f"--{name}: a value is given twice in {','.join(map(str, values))}")
    return values


def _positive(name: str, values) -> list:
    for v in values:
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
            raise SweepError(f"--{name}: expected whole numbers >= 1, got {v!r}")
    return values


def grid(models, *, batch=None, seq=None, resolution=None, input_shape=(), dtype=None, weights=None,
         hardware=None, phase=None, plan=None) -> list:
    """The cells of a sweep, models outermost, then phase (or training plan), hardware, dtype,
    weights, and the numeric axes innermost (so a model's curve over ``seq`` is a run of
    consecutive rows). Plan cells take ``batch`` as the global batch."""
    models = list(models)
    if not models:
        raise SweepError("a sweep needs at least one model")
    phases = _values("phase", phase)
    for p in phases:
        if p is not None and p not in PHASES[:-1]:
            raise SweepError(f"--phase: {p!r} is not one of {', '.join(PHASES[:-1])} (a --plan cell trains)")
    plans = _values("plan", plan)
    if plans != [None]:
        if phases != [None]:
            raise SweepError("--plan cells price a training step: give --phase or --plan, not both")
        phases = ["train"]
    if any(p in ("prefill", "decode") for p in phases) and not seq:
        raise SweepError("--phase prefill or decode needs --seq: the prompt length or the context")
    template = tuple(input_shape or ())
    axes = {"batch": _positive("batch", _values("batch", batch)), "seq": _positive("seq", _values("seq", seq)),
            "resolution": _positive("resolution", _values("resolution", resolution))}
    used = {m.group(1) for text in template for m in PLACEHOLDER.finditer(text)}
    for name in used - {"batch"}:
        if axes[name] == [None]:
            raise SweepError(f"--input-shape {';'.join(template)} uses {{{name}}}: give --{name}")
    combos = itertools.product(models, phases, plans, _values("hardware", hardware), _values("dtype", dtype),
                               _values("weights", weights), axes["batch"], axes["seq"], axes["resolution"])
    return [Cell(i, model, p or "forward", b, s, r, template, d, w, h, plan_text)
            for i, (model, p, plan_text, h, d, w, b, s, r) in enumerate(combos)]


def read_models(arguments) -> list:
    """Model arguments, where a ``.txt`` file stands for the models it lists (one per line;
    blank lines and ``#`` comments skipped)."""
    models = []
    for arg in arguments:
        if str(arg).endswith(".txt") and os.path.isfile(arg):
            try:
                with open(arg, encoding="utf-8") as f:
                    lines = [line.split("#", 1)[0].strip() for line in f]
            except UnicodeDecodeError:
                raise SweepError(f"{arg}: not a text file of models (one per line)") from None
            listed = [line for line in lines if line]
            if not listed:
                raise SweepError(f"{arg}: lists no models (one per line)")
            models += listed
        else:
            models.append(str(arg))
    return models
