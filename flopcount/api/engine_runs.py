"""Who runs the model for its latency when not flopcount's runtime: :func:`check_engine` refuses,
before anything runs, an engine that cannot run the model, and :func:`run_engine` returns a copy
of the report with that engine's times joined to its rows (see :mod:`flopcount.engines`).

    >>> run_engine(report, "flopcount", target, warmup=1, repeat=5) is report   # doctest: +SKIP
    True
"""

from __future__ import annotations

from .. import loading
from ..engines import jax_engine, onnxruntime_engine, torch_engine
from ..report import Report
from ..runtime import errors


def check_engine(engine: str, target) -> None:
    """Refuse, before anything runs, an engine that cannot run this model."""
    if engine == torch_engine.NAME and target.torch_call is None:
        raise errors.FlopcountError(f"engine 'torch' times a PyTorch model; {target.name} is not one "
                                    f"(a {target.kind} model runs on flopcount's runtime: engine 'flopcount')")
    if engine == jax_engine.NAME and target.jax_call is None:
        raise errors.FlopcountError(f"engine 'jax' times a JAX model; {target.name} is not one "
                                    f"(a {target.kind} model runs on flopcount's runtime: engine 'flopcount')")
    if engine == onnxruntime_engine.NAME and target.kind != loading.ONNX:
        raise errors.FlopcountError(f"engine 'onnxruntime' times an ONNX file; {target.name} is not one "
                                    f"(a {target.kind} model runs on flopcount's runtime: engine 'flopcount')")


def run_engine(report: Report, engine: str, target, warmup: int, repeat: int, inputs: tuple = ((), {}, {}),
               device="cpu", threads: int | None = None) -> Report:
    """``engine="torch"``: the PyTorch model timed by PyTorch; ``"onnxruntime"``: the ONNX file
    timed by onnxruntime on ``inputs`` (the args and kwargs flopcount ran the graph on, and the
    values bound to inputs that carry shapes): a copy of ``report`` with their times on its rows
    (``report`` itself, as it was, for engine "flopcount")."""
    if engine == "flopcount":
        return report
    timed = report.copy()
    if engine == torch_engine.NAME:
        module, args, kwargs = target.torch_call
        times = torch_engine.time_module(module, args, kwargs, warmup=warmup, repeat=repeat)
        torch_engine.join(timed, times, torch_engine.time_ops(module, args, kwargs, repeat=repeat))
    elif engine == jax_engine.NAME:
        model, args = target.jax_call
        jax_engine.join(timed, jax_engine.time_call(model, args, warmup=warmup, repeat=repeat))
    elif engine == onnxruntime_engine.NAME:
        from ..runtime.host_memory import check_fits
        from ..runtime.onnx.importer import read_model

        # refused before onnxruntime allocates it, with the figure flopcount has: the liveness
        # peak of the same graph (onnxruntime plans and fuses on its own, so its peak may differ)
        check_fits(timed.memory.predicted_peak or 0, f"running {target.label} in onnxruntime (activations at "
                   f"their predicted peak)", "count without latency (shapes only), or use smaller inputs",
                   device=device)
        feeds = _feeds(target.model, *inputs)
        ort_times = onnxruntime_engine.time_file(target.path, feeds, device=str(device), threads=threads,
                                                 warmup=warmup, repeat=repeat)
        onnxruntime_engine.join(timed, ort_times, read_model(target.path))
    return timed


def _feeds(net, args: tuple, kwargs: dict, values: dict | None) -> dict:
    """{graph input name: numpy array} of a run's inputs, and the values bound to inputs that
    carry shapes; an input without data (meta) gets seeded values of its shape and dtype."""
    import numpy as np

    rng = np.random.default_rng(0)
    given = dict(zip([v.name for v in getattr(net, "inputs", [])], args))
    given.update(kwargs)
    feeds = {}
    for name, t in given.items():
        if getattr(t, "data", None) is not None:
            feeds[name] = t.numpy()
        elif t.dtype.is_floating_point:
            feeds[name] = rng.standard_normal(t.shape).astype(t.dtype.np)
        else:
            feeds[name] = np.zeros(t.shape, t.dtype.np)
    feeds.update((k, np.asarray(v)) for k, v in (values or {}).items())
    return feeds


__all__ = ["check_engine", "run_engine"]
