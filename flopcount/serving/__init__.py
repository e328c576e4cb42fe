"""Serving at a request rate: a continuous-batching server simulated on the model's traced step
costs (:mod:`~flopcount.serving.steptime`), with paged KV blocks, chunked prefill, preemption,
prefix caching and speculative decoding (:mod:`~flopcount.serving.simulator`).

    >>> from flopcount import serving
    >>> r = serving.serve("llama", "h100-sxm", rates=[5.0], prompt="64", output="16", duration=2)
    >>> r.points[0].requests > 0
    True
"""

from __future__ import annotations

from .api import Percentiles, RatePoint, ServeResult, kv_blocks, serve
from .simulator import Run, Server, simulate
from .steptime import StepTime, fit
from .workload import Lengths, Request, WorkloadError, poisson

__all__ = ["serve", "ServeResult", "RatePoint", "Percentiles", "kv_blocks", "simulate", "Server", "Run", "StepTime",
           "fit", "Lengths", "Request", "WorkloadError", "poisson"]
