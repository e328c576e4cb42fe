"""A serving workload: requests arriving at a rate, with prompt and output lengths drawn from
distributions, reproducible from a seed.

Lengths are written ``512`` (fixed), ``uniform:128:2048``, ``normal:512:128`` (clipped at 1) or
``lognormal:512:1.0`` (median 512, sigma of the log):

    >>> requests = poisson(rate=2.0, duration=10.0, prompt=Lengths.parse("512"),
    ...                    output=Lengths.parse("uniform:64:256"), seed=0)
    >>> all(r.prompt == 512 and 64 <= r.output <= 256 for r in requests)
    True
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..runtime.errors import FlopcountError

KINDS = ("fixed", "uniform", "normal", "lognormal")


class WorkloadError(FlopcountError):
    """A length distribution, rate or duration that cannot be simulated."""


@dataclass(frozen=True)
class Lengths:
    """A distribution of token counts."""

    kind: str
    a: float
    b: float = 0.0

    @classmethod
    def parse(cls, text: str, what: str = "length") -> "Lengths":
        parts = str(text).strip().split(":")
        try:
            numbers = [float(p) for p in parts[1:]] if parts[0] in KINDS else [float(p) for p in parts]
        except ValueError:
            numbers = None
        kind = parts[0] if parts[0] in KINDS else "fixed"
        needed = {"fixed": 1, "uniform": 2, "normal": 2, "lognormal": 2}[kind]
        if numbers is None or len(numbers) != needed or any(not math.isfinite(n) for n in numbers):
            raise WorkloadError(f"{what} {text!r}: expected N, uniform:LOW:HIGH, normal:MEAN:STD or "
                                f"lognormal:MEDIAN:SIGMA")
        lengths = cls(kind, *numbers)
        low = lengths.a
        if low < 1 or (kind == "uniform" and lengths.b < lengths.a) or (kind != "fixed" and lengths.b < 0):
            raise WorkloadError(f"{what} {text!r}: lengths are at least 1 token (and LOW <= HIGH, STD >= 0)")
        return lengths

    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        if self.kind == "fixed":
            values = np.full(n, self.a)
        elif self.kind == "uniform":
            values = rng.integers(int(self.a), int(self.b) + 1, n)
        elif self.kind == "normal":
            values = rng.normal(self.a, self.b, n)
        else:
            values = self.a * np.exp(rng.normal(0.0, self.b, n))
        return np.maximum(1, np.rint(values)).astype(np.int64)

    def mean(self) -> float:
        """The mean (of the unclipped distribution), for sizing."""
        return {"fixed": self.a, "uniform": (self.a + self.b) / 2, "normal": self.a,
                "lognormal": self.a * math.exp(self.b ** 2 / 2)}[self.kind]

    def __str__(self) -> str:
        if self.kind == "fixed":
            return f"{self.a:g}"
        return f"{self.kind}:{self.a:g}:{self.b:g}"


@dataclass(frozen=True)
class Request:
    """One request: when it arrives, its prompt and output lengths in tokens."""

    index: int
    arrival: float
    prompt: int
    output: int


def poisson(rate: float, duration: float, prompt: Lengths, output: Lengths, seed: int = 0) -> list:
    """Requests arriving as a Poisson process at ``rate`` per second for ``duration`` seconds."""
    if not (rate > 0 and math.isfinite(rate)):
        raise WorkloadError(f"rate must be a number of requests per second > 0, got {rate!r}")
    if not (duration > 0 and math.isfinite(duration)):
        raise WorkloadError(f"duration must be seconds > 0, got {duration!r}")
    rng = np.random.default_rng(seed)
    times, t = [], 0.0
    while True:
        t += rng.exponential(1.0 / rate)
        if t > duration:
            break
        times.append(t)
    prompts, outputs = prompt.draw(rng, len(times)), output.draw(rng, len(times))
    return [Request(i, times[i], int(prompts[i]), int(outputs[i])) for i in range(len(times))]
