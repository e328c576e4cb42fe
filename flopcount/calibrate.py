"""``flopcount calibrate``: time a bounded suite of ops on one engine and save a calibrated
hardware profile (see :mod:`flopcount.hardware.calibrated`).

The suite covers every op class and subclass at several sizes: GEMMs of few and of many rows
and batched GEMMs, dense 3x3 and 1x1, grouped, depthwise and strided convolutions, attention,
elementwise ops, norms, reductions and pooling. Each case is a
small model profiled with ``latency=True`` on the engine asked for (for onnxruntime, the model
exported to an ONNX file first, as onnxruntime takes it), in the dtype asked for; every timed op
gives one point, its measured time against its roofline time on the base profile (``cpu``: this
machine, measured; on a GPU, the datasheet of the part the driver names,
``hardware.devices``). The curves are what later predictions read, with one more figure: what each op
costs outside its timed kernel (dispatch, module calls), from the dispatch-bound cases' whole
runs against their ops' spans (``hardware.calibrated.op_overhead``).

    >>> profile = calibrate(quick=True)          # doctest: +SKIP
    >>> sorted(profile.curves)[:6]               # doctest: +SKIP
    ['attention', 'conv', 'conv_depthwise', 'conv_grouped', 'conv_pointwise', 'elementwise']
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import tempfile
from dataclasses import dataclass
from typing import Callable

import numpy as np

from . import api
from .version import __version__
from .hardware import get as hardware_profile
from .hardware.calibrated import (DISPATCH_BOUND_S, FALLBACK, GROUPED, OVERHEAD, PER_GROUP, VIEW, cache_folder, groups,
                                  op_class, op_overhead)
from .io_utils import atomic_write
from .hardware.devices import datasheet_for
from .runtime import clock as rt_clock
from .runtime.device import backend as device_backend
from .runtime.device import device as parse_device
from .runtime import threads as rt_threads
from .runtime.errors import DeviceError, FlopcountError

ENGINES = ("flopcount", "torch", "onnxruntime")
DTYPES = ("float32", "float16", "bfloat16")


@dataclass(frozen=True)
class Case:
    """One model of the suite: its class, a builder of (module, inputs) for a framework."""

    kind: str
    label: str
    build: Callable


def _frameworks(engine: str):
    # onnxruntime runs the flopcount models' ONNX exports
    if engine == "torch":
        import torch

        return torch, torch.nn, torch.nn.functional, torch.nn.Module
    from . import runtime as rt

    return rt, rt.nn, rt.nn.functional, rt.nn.Module


def _suite(quick: bool) -> list:
    """The cases: sizes from dispatch-bound to throughput-bound for each class."""
    pick = (lambda xs: xs[::2]) if quick else (lambda xs: xs)
    cases = []
    # GEMMs of few rows (a transformer's tokens at batch 1) and of many, each regime at several sizes
    # (in an order where the quick suite's every other case keeps both)
    for m, k, n in pick([(8, 512, 512), (1, 256, 256), (256, 1024, 2048), (64, 1024, 1024), (128, 768, 3072),
                         (512, 2048, 2048), (1024, 768, 768), (32, 2048, 2048), (196, 3072, 768), (1024, 1024, 3072)]):
        cases.append(Case("matmul", f"linear {m}x{k}x{n}", lambda fw, m=m, k=k, n=n: (
            fw[1].Linear(k, n), [fw[0].randn(m, k)])))
    for b, m, k in pick([(4, 32, 64), (16, 128, 64), (32, 256, 128)]):
        cases.append(Case("matmul", f"bmm {b}x{m}x{k}", lambda fw, b=b, m=m, k=k: (
            _binary(fw, "matmul"), [fw[0].randn(b, m, k), fw[0].randn(b, k, m)])))
    for c, h, n in pick([(16, 56, 1), (64, 28, 1), (128, 28, 1), (256, 14, 1), (64, 56, 4), (256, 28, 4)]):
        cases.append(Case("conv", f"conv3x3 {n}x{c}@{h}", lambda fw, c=c, h=h, n=n: (
            fw[1].Conv2d(c, c, 3, padding=1), [fw[0].randn(n, c, h, h)])))
    # grouped: the channels per group decide the speed (resnext's 4 to 32, regnet's 24)
    for c, h, per_group, n in pick([(128, 56, 4, 1), (256, 28, 8, 1), (512, 14, 16, 1), (1024, 7, 32, 1),
                                    (128, 28, 4, 4), (336, 14, 24, 4), (256, 14, 8, 4), (120, 28, 24, 1)]):
        cases.append(Case("conv", f"grouped {n}x{c}/{per_group}@{h}", lambda fw, c=c, h=h, g=c // per_group, n=n: (
            fw[1].Conv2d(c, c, 3, padding=1, groups=g), [fw[0].randn(n, c, h, h)])))
    for c, h in pick([(16, 56), (64, 28), (128, 28), (256, 14)]):
        cases.append(Case("conv", f"depthwise {c}@{h}", lambda fw, c=c, h=h: (
            fw[1].Conv2d(c, c, 3, padding=1, groups=c), [fw[0].randn(1, c, h, h)])))
        cases.append(Case("conv", f"1x1/2 {c}@{h}", lambda fw, c=c, h=h: (
            fw[1].Conv2d(c, 2 * c, 1, stride=2), [fw[0].randn(1, c, h, h)])))
    # 1x1 convolutions (a bottleneck's and an inverted residual's): GEMMs, no window
    for c_in, c_out, h, n in pick([(64, 256, 56, 1), (256, 64, 56, 1), (512, 128, 28, 1), (1024, 256, 14, 1),
                                   (2048, 512, 7, 1), (32, 192, 28, 4), (256, 1024, 14, 4), (960, 160, 7, 4)]):
        cases.append(Case("conv", f"1x1 {n}x{c_in}>{c_out}@{h}", lambda fw, c_in=c_in, c_out=c_out, h=h, n=n: (
            fw[1].Conv2d(c_in, c_out, 1), [fw[0].randn(n, c_in, h, h)])))
    for b, s, d in pick([(1, 64, 64), (4, 128, 64), (8, 256, 64)]):
        cases.append(Case("attention", f"attention {b}x{s}x{d}", lambda fw, b=b, s=s, d=d: (
            _attention(fw), [fw[0].randn(b, 4, s, d) for _ in range(3)])))
    for n in pick([1 << 10, 1 << 14, 1 << 18, 1 << 21, 1 << 23]):
        cases.append(Case("elementwise", f"gelu, add {n}", lambda fw, n=n: (_gelu_add(fw), [fw[0].randn(n)])))
        cases.append(Case("elementwise", f"relu, mul {n}", lambda fw, n=n: (_relu_mul(fw), [fw[0].randn(n)])))
        cases.append(Case("reduction", f"softmax {n}", lambda fw, n=n: (
            fw[1].Softmax(dim=-1), [fw[0].randn(n // 256, 256)])))
        cases.append(Case("norm", f"layer_norm {n}", lambda fw, n=n: (
            fw[1].LayerNorm(256), [fw[0].randn(n // 256, 256)])))
    for c, h, n in pick([(16, 28, 1), (64, 56, 1), (128, 28, 4), (256, 56, 4)]):
        cases.append(Case("norm", f"batch_norm {n}x{c}@{h}", lambda fw, c=c, h=h, n=n: (
            fw[1].BatchNorm2d(c), [fw[0].randn(n, c, h, h)])))
    for n in pick([1 << 12, 1 << 18]):
        cases.append(Case("view", f"reshape, permute {n}", lambda fw, n=n: (_views(fw), [fw[0].randn(n // 64, 64)])))
    # many tiny ops in one run: their whole run against their spans gives the cost per op outside
    # the kernel apart from the run's own fixed cost (hardware.calibrated.op_overhead)
    cases.append(Case("elementwise", f"relu x{CHAIN}", lambda fw: (_relu_chain(fw), [fw[0].randn(256)])))
    for c, h in pick([(16, 56), (64, 56), (128, 28)]):
        cases.append(Case("pool", f"max_pool {c}@{h}", lambda fw, c=c, h=h: (
            fw[1].MaxPool2d(2), [fw[0].randn(1, c, h, h)])))
    # to one value per channel: squeeze-and-excitation blocks' sizes and a classifier head's
    for c, h, n in pick([(32, 112, 1), (96, 56, 1), (240, 28, 1), (672, 14, 8), (1152, 7, 8), (2048, 7, 1)]):
        cases.append(Case("pool", f"global avg_pool {n}x{c}@{h}", lambda fw, c=c, h=h, n=n: (
            fw[1].AdaptiveAvgPool2d(1), [fw[0].randn(n, c, h, h)])))
    return cases


CHAIN = 16


def _relu_chain(fw):
    class ReluChain(fw[3]):
        def forward(self, x):
            for _ in range(CHAIN):
                x = fw[2].relu(x)
            return x

    return ReluChain()


def _binary(fw, op: str):
    class Binary(fw[3]):
        def forward(self, a, b):
            return a @ b if op == "matmul" else a + b

    return Binary()


def _attention(fw):
    class Attention(fw[3]):
        def forward(self, q, k, v):
            return fw[2].scaled_dot_product_attention(q, k, v)

    return Attention()


def _views(fw):
    class Views(fw[3]):
        def forward(self, x):
            return x.reshape(x.shape[0], 8, 8).permute(0, 2, 1)[0] * 2

    return Views()


def _relu_mul(fw):
    class ReluMul(fw[3]):
        def forward(self, x):
            return fw[2].relu(x) * x

    return ReluMul()


def _gelu_add(fw):
    class GeluAdd(fw[3]):
        def forward(self, x):
            return fw[2].gelu(x) + x

    return GeluAdd()


class Calibration:
    """The suite's timings so far on one engine: ``run_pass()`` times every case once more
    (``repeat`` runs after a warm-up), ``profile()`` is the calibrated profile from all passes.
    Passes can be spread out among other timed work (benchmarks/calibrated_prediction.py
    interleaves them with the models it checks), so that both see the same machine.

    Every case runs on ``threads`` threads, the cores free when the calibration starts unless
    given, the same number throughout (a case on two threads and the next on one would draw
    two machines); the profile records it, and predicts runs on that many threads.

    An op's point is its fastest run in each pass (where the engine reports one per op; else
    its median run), the median over passes. On a shared machine other work only ever adds
    time: a run's fastest repeat is the steadiest figure (one thread, four passes of 7 runs
    while other processes ran tests: mobilenet_v2 at batch 8 fastest 141-148 ms, medians
    148-219 ms; resnet18 35.1-45.3 ms against 37.2-57.9 ms), and the median over passes drops
    a pass that a neighbour slowed throughout.
    benchmarks/calibrated_prediction.py measures models the same way.

        >>> calibration = Calibration(quick=True, repeat=1, threads=1)   # doctest: +SKIP
        >>> calibration.run_pass(); calibration.profile().calibration["threads"]   # doctest: +SKIP
        1
    """

    def __init__(self, *, engine: str = "flopcount", device: str = "cpu", dtype: str = "float32",
                 base: str | None = None, quick: bool = False, repeat: int = 5, threads: int | None = None):
        if engine not in ENGINES:
            raise FlopcountError(f"calibrate: engine must be one of {', '.join(ENGINES)}, got {engine!r}")
        if dtype not in DTYPES:
            raise FlopcountError(f"calibrate: dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
        if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
            raise FlopcountError(f"calibrate: repeat must be a whole number of at least 1, got {repeat!r}")
        self.engine, self.device, self.dtype, self.quick, self.repeat = engine, str(device), dtype, quick, repeat
        # the GPU is looked for first: its absence is one line now, not an error from the first case
        self.gpu = gpu_name(engine, self.device) if _on_gpu(self.device) else None
        self.threads = rt_threads.choose(threads).threads
        # the base profile (``cpu``: measured here, once per process) on the cases' threads: BLAS's
        # default pool spins on busy cores, and under a load of 6 made the GEMM peak it measured
        # a thirtieth of a quiet machine's (the curves then read 400-3000% of the roofline)
        with rt_threads.limited(self.threads):
            self.base = hardware_profile(base or (_datasheet(self.gpu, self.device) if self.gpu else "cpu"))
        self.cases = _suite(quick)
        self.passes = 0
        self.points: dict = {}      # op class -> [(roofline s, measured s), ...] over all passes
        self._fw = _frameworks(engine)
        self.dispatch: list = []    # dispatch-bound cases: (whole s, ops' timed s summed, ops), all passes
        self._kept: dict = {}       # engine torch: case index -> (module, inputs, counted report, ATen graph)

    def run_pass(self, progress: Callable[[int, int, str], None] | None = None) -> None:
        """Time every case of the suite once more; ``progress(i, n, label)`` before each."""
        with tempfile.TemporaryDirectory(prefix="flopcount-calibrate-") as folder:
            for i, case in enumerate(self.cases):
                if progress is not None:
                    progress(i, len(self.cases), case.label)
                if self.engine == "torch":
                    report = self._retimed(i, case)
                else:
                    report = _timed(case, self._fw, self.engine, folder, dtype=self.dtype, repeat=self.repeat,
                                    hardware=self.base, device=self.device, threads=self.threads)
                _add_points(self.points, report)
                whole_and_ops = _dispatch_bound(report)
                if whole_and_ops is not None:
                    self.dispatch.append(whole_and_ops)
        self.passes += 1

    def _retimed(self, index: int, case: Case):
        """Engine torch: the case's report with PyTorch's per-op times of this pass. The case is
        captured once (``torch.export``, as flopcount captures a PyTorch model), counted from
        that capture and timed again on it in every pass: a capture takes about ten times as
        long as the case's timed runs (0.5-1.3 s against 0.1 s), and capturing it twice in
        every pass (to count it, and to run its ATen graph node by node) made most of the
        calibration's time."""
        from .engines import torch_engine
        from .runtime.torch.importer import convert

        kept = self._kept.get(index)
        if kept is None:
            module, inputs = _built(case, self._fw, "torch", self.device, self.dtype)
            inputs = tuple(inputs)
            graph = torch_engine.capture_graph(module, inputs, {})
            if isinstance(graph, str):
                raise FlopcountError(f"calibrate: case {case.label!r} could not be captured: {graph}")
            # counted on the meta device: the counts need shapes only, and a half-precision GEMM
            # run on the CPU to count it would take longer than the whole pass
            counted = api.profile(convert(graph)[0], *inputs, hardware=self.base, device="meta")
            kept = self._kept[index] = (module, inputs, counted, graph)
        module, inputs, counted, graph = kept
        whole = torch_engine.ModuleTimes((None, None))
        with rt_threads.limited(self.threads):
            ops = torch_engine.time_captured(graph, inputs, {}, repeat=self.repeat)
            # the whole runs only where the overhead is read (the ops' spans are within the run)
            if isinstance(ops, dict) and sum(ops.values()) / 1e3 <= DISPATCH_BOUND_S * len(ops):
                whole = torch_engine.time_module(module, inputs, {}, warmup=1, repeat=self.repeat)
        timed = counted.copy()
        torch_engine.join(timed, whole, ops)
        return timed

    def profile(self):
        """The calibrated profile from the passes so far (not saved)."""
        curves = {kind: _curve(p) for kind, p in self.points.items()}
        if FALLBACK not in curves:
            raise FlopcountError("calibrate: no elementwise op was timed; the suite did not run")
        # each op's cost outside its timed kernel, which models pay once per op (hardware.calibrated)
        overhead = op_overhead(self.dispatch)
        meta = {"engine": self.engine, "device": self.device, "gpu": self.gpu, "dtype": self.dtype,
                "base": self.base.name, "quick": self.quick, "repeat": self.repeat, "rounds": self.passes,
                "threads": self.threads, "clock": GPU_CLOCK if self.gpu else rt_clock.for_threads(self.threads),
                "grouped": PER_GROUP, OVERHEAD: overhead,
                "statistic": "each pass's fastest run of an op, the median over passes",
                "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, {platform.system()}",
                "versions": _versions(self.engine, on_gpu=self.gpu is not None),
                "load_average": os.getloadavg()[0] if hasattr(os, "getloadavg") else None}
        # a profile per dtype: a half-precision GEMM reaches another share of its roofline
        name, title = f"{self.base.name}-{self.engine}", f"{self.base.title}, calibrated with {self.engine}"
        if self.dtype != "float32":
            name, title = f"{name}-{self.dtype}", f"{title} in {self.dtype}"
        return self.base.with_(name=name, title=title, curves=curves, calibration=meta)


def calibrate(*, engine: str = "flopcount", device: str = "cpu", dtype: str = "float32", base: str | None = None,
              quick: bool = False, repeat: int = 5, rounds: int = 3, threads: int | None = None,
              progress: Callable[[int, int, str], None] | None = None):
    """Run the suite ``rounds`` times on ``engine`` (see :class:`Calibration`) and return the
    calibrated profile (not saved). ``progress(i, n, label)`` is called before each case.

        >>> profile = calibrate(quick=True, rounds=1, threads=1)   # doctest: +SKIP
        >>> profile.calibration["rounds"], profile.calibration["threads"]   # doctest: +SKIP
        (1, 1)
    """
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
        raise FlopcountError(f"calibrate: rounds must be a whole number of at least 1, got {rounds!r}")
    calibration = Calibration(engine=engine, device=device, dtype=dtype, base=base, quick=quick, repeat=repeat,
                              threads=threads)
    steps = len(calibration.cases) * rounds
    for round_index in range(rounds):
        offset = round_index * len(calibration.cases)
        calibration.run_pass(None if progress is None else
                             (lambda i, n, label, offset=offset: progress(offset + i, steps, label)))
    return calibration.profile()


GPU_CLOCK = "the GPU's own timers (CUDA events, or the engine's profiler)"


def _on_gpu(device: str) -> bool:
    """True for ``cuda`` and ``cuda:N``, False for ``cpu``; a one-line error for anything else."""
    try:
        kind = parse_device(device).type
    except DeviceError:
        kind = None
    if kind not in ("cpu", "cuda"):
        raise DeviceError(f"calibrate: device must be cpu, cuda or cuda:N, got {device!r}")
    return kind == "cuda"


def gpu_name(engine: str, device: str) -> str:
    """The name of the CUDA device ``engine`` runs on (as its driver reports it); a one-line
    DeviceError where the engine sees no such device."""
    index = parse_device(device).index
    if engine == "torch":
        import torch

        if not torch.cuda.is_available() or index >= torch.cuda.device_count():
            raise DeviceError(f"calibrate: engine torch on {device}: torch {torch.__version__} sees "
                              f"{torch.cuda.device_count()} CUDA device(s)")
        return torch.cuda.get_device_name(index)
    if engine == "onnxruntime":
        from .engines import onnxruntime_engine

        onnxruntime_engine.providers(device)   # the CUDA execution provider, or its one-line error
    device_backend(parse_device(device))   # CuPy and that GPU, or the runtime's one-line error
    import cupy

    return cupy.cuda.runtime.getDeviceProperties(index)["name"].decode()


def _datasheet(gpu: str, device: str) -> str:
    name = datasheet_for(gpu)
    if name is None:
        raise FlopcountError(f"calibrate: no datasheet profile is known for {gpu!r} on {device}; name the one to "
                             f"read its curves against with --base (see flopcount hardware)")
    return name


def _built(case: Case, fw, engine: str, device: str, dtype: str) -> tuple:
    """The case's module (in eval mode) and inputs in ``dtype``; PyTorch's also on ``device``
    (flopcount's runtime and onnxruntime are given the device by ``profile()``)."""
    module, inputs = case.build(fw)
    floating = getattr(fw[0], dtype)
    if engine == "torch":
        return module.to(device=device, dtype=floating).eval(), [t.to(device=device, dtype=floating) for t in inputs]
    if dtype == "float32":
        return module.eval(), inputs
    return module.to(floating).eval(), [t.to(floating) for t in inputs]


def _timed(case: Case, fw, engine: str, folder: str, *, dtype: str, **options):
    """The case's report with per-op times on ``engine``; onnxruntime times the case's ONNX export."""
    module, inputs = _built(case, fw, engine, options["device"], dtype)
    if engine == "onnxruntime":
        from .runtime import onnx as onnx_io

        path = os.path.join(folder, f"case-{abs(hash(case.label))}.onnx")
        onnx_io.export(module, path, *inputs)
        return api.profile(path, *inputs, latency=True, warmup=1, engine=engine, **options)
    return api.profile(module, *inputs, latency=True, warmup=1, engine=engine, **options)


def _add_points(points: dict, report) -> None:
    """(roofline seconds, measured seconds) of every timed op, by op class: the op's fastest
    run where the engine reports one per op (flopcount's graph nodes), else its median; a
    grouped convolution's divided by its groups (the curve is read per group)."""
    fastest = {row.name: row.latency_min_ms for row in report.rows if row.kind == "op" and row.latency_min_ms}
    for record in report.by_op("forward"):
        if record.latency_ms and record.roofline_ms is not None:
            kind = op_class(record.op, record.input_shapes) if record.roofline_ms > 0 else VIEW
            measured_ms = fastest.get(record.name, record.latency_ms)
            n = groups(record.input_shapes) if kind == GROUPED else 1   # grouped: one group's share
            points.setdefault(kind, []).append((record.roofline_ms / 1e3 / n, measured_ms / 1e3 / n))


def _dispatch_bound(report) -> tuple | None:
    """(whole run's seconds, its ops' timed seconds summed, ops) of a case whose whole run took at
    most DISPATCH_BOUND_S per op (its fastest where the engine reports one, else its median);
    None for longer cases or where the engine timed no whole run. Each op's figure is the one
    its point takes (``_add_points``)."""
    whole_ms = report.latency_min_ms or report.latency_ms
    records = report.by_op("forward")
    if not whole_ms or not records or whole_ms / 1e3 / len(records) > DISPATCH_BOUND_S:
        return None
    fastest = {row.name: row.latency_min_ms for row in report.rows if row.kind == "op" and row.latency_min_ms}
    ops_ms = sum(fastest.get(r.name, r.latency_ms) or 0.0 for r in records)
    return whole_ms / 1e3, ops_ms / 1e3, len(records)


SAME_COST = 1.05   # roofline times within 5% of a group's first are one point of the curve


def _curve(points: list) -> tuple:
    """Points sorted by roofline time, those of nearly the same roofline time (one op in several
    passes, the same op twice in a case, cases of the same cost) merged into one: the median of
    their roofline and of their measured times. Cases of one cost whose kernels differ (1x1
    convolutions of the same FLOPs on 56x56 and on 7x7 planes) then read as their median, not
    as whichever lies a percent nearer.

        >>> _curve([(1.0, 2.0), (1.02, 1.0), (1.01, 3.0), (2.0, 2.0)])
        ((1.01, 2.0), (2.0, 2.0))
    """
    groups: list = []
    for roofline_s, measured_s in sorted(points):
        if groups and roofline_s <= groups[-1][0][0] * SAME_COST:
            groups[-1].append((roofline_s, measured_s))
        else:
            groups.append([(roofline_s, measured_s)])
    return tuple((float(np.median([x for x, _ in group])), float(np.median([y for _, y in group])))
                 for group in groups)


def _versions(engine: str, on_gpu: bool) -> dict:
    out = {"flopcount": __version__, "numpy": np.__version__, "python": platform.python_version()}
    if engine == "torch":
        import torch

        out["torch"] = torch.__version__
        if on_gpu:
            out["cuda"], out["cudnn"] = torch.version.cuda, torch.backends.cudnn.version()
    elif on_gpu:
        import cupy

        out["cupy"], out["cuda_runtime"] = cupy.__version__, cupy.cuda.runtime.runtimeGetVersion()
    if engine == "onnxruntime":
        import onnxruntime

        out["onnxruntime"] = onnxruntime.__version__
    return out


def save(profile, path: str) -> None:
    """Write a calibrated profile (atomically), making its folder if needed."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    atomic_write(path, json.dumps(profile.to_dict(), indent=1) + "\n")


def default_path(name: str) -> str:
    return os.path.join(cache_folder(), f"{name}.json")


__all__ = ["Calibration", "calibrate", "gpu_name", "save", "default_path", "DTYPES", "ENGINES"]
