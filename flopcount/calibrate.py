"""``flopcount calibrate``: time a bounded suite of ops on one engine and save a calibrated
hardware profile (see :mod:`flopcount.hardware.calibrated`).

The suite covers every op class at several sizes: GEMMs and batched GEMMs, dense, depthwise and
strided convolutions, attention, elementwise ops, norms, reductions and pooling. Each case is a
small model profiled with ``latency=True`` on the engine asked for (for onnxruntime, the model
exported to an ONNX file first, as onnxruntime takes it); every timed op gives one
point, its measured time against its roofline time on the base profile (``cpu``: this machine,
measured). The curves are what later predictions read.

    >>> profile = calibrate(quick=True)          # doctest: +SKIP
    >>> sorted(profile.curves)                   # doctest: +SKIP
    ['attention', 'conv', 'elementwise', 'matmul', 'norm', 'pool', 'reduction']
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
from .hardware.calibrated import FALLBACK, VIEW, cache_folder, op_class
from .io_utils import atomic_write
from .runtime.errors import FlopcountError

ENGINES = ("flopcount", "torch", "onnxruntime")


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
    for m, k, n in pick([(1, 256, 256), (8, 512, 512), (64, 1024, 1024), (256, 1024, 2048), (512, 2048, 2048)]):
        cases.append(Case("matmul", f"linear {m}x{k}x{n}", lambda fw, m=m, k=k, n=n: (
            fw[1].Linear(k, n), [fw[0].randn(m, k)])))
    for b, m, k in pick([(4, 32, 64), (16, 128, 64), (32, 256, 128)]):
        cases.append(Case("matmul", f"bmm {b}x{m}x{k}", lambda fw, b=b, m=m, k=k: (
            _binary(fw, "matmul"), [fw[0].randn(b, m, k), fw[0].randn(b, k, m)])))
    for c, h, n in pick([(16, 56, 1), (64, 28, 1), (128, 28, 1), (256, 14, 1), (64, 56, 4), (256, 28, 4)]):
        cases.append(Case("conv", f"conv3x3 {n}x{c}@{h}", lambda fw, c=c, h=h, n=n: (
            fw[1].Conv2d(c, c, 3, padding=1), [fw[0].randn(n, c, h, h)])))
    for c, h, g in pick([(64, 56, 4), (128, 28, 8), (256, 14, 16), (512, 7, 32)]):
        cases.append(Case("conv", f"grouped {c}/{g}@{h}", lambda fw, c=c, h=h, g=g: (
            fw[1].Conv2d(c, c, 3, padding=1, groups=g), [fw[0].randn(1, c, h, h)])))
    for c, h in pick([(16, 56), (64, 28), (128, 28), (256, 14)]):
        cases.append(Case("conv", f"depthwise {c}@{h}", lambda fw, c=c, h=h: (
            fw[1].Conv2d(c, c, 3, padding=1, groups=c), [fw[0].randn(1, c, h, h)])))
        cases.append(Case("conv", f"1x1/2 {c}@{h}", lambda fw, c=c, h=h: (
            fw[1].Conv2d(c, 2 * c, 1, stride=2), [fw[0].randn(1, c, h, h)])))
    for b, s, d in pick([(1, 64, 64), (4, 128, 64), (8, 256, 64)]):
        cases.append(Case("attention", f"attention {b}x{s}x{d}", lambda fw, b=b, s=s, d=d: (
            _attention(fw), [fw[0].randn(b, 4, s, d) for _ in range(3)])))
    for n in pick([1 << 10, 1 << 14, 1 << 18, 1 << 21, 1 << 23]):
        cases.append(Case("elementwise", f"gelu, add {n}", lambda fw, n=n: (_gelu_add(fw), [fw[0].randn(n)])))
        cases.append(Case("reduction", f"softmax {n}", lambda fw, n=n: (
            fw[1].Softmax(dim=-1), [fw[0].randn(n // 256, 256)])))
        cases.append(Case("norm", f"layer_norm {n}", lambda fw, n=n: (
            fw[1].LayerNorm(256), [fw[0].randn(n // 256, 256)])))
    for n in pick([1 << 12, 1 << 18]):
        cases.append(Case("view", f"reshape, permute {n}", lambda fw, n=n: (_views(fw), [fw[0].randn(n // 64, 64)])))
    for c, h in pick([(16, 56), (64, 56), (128, 28)]):
        cases.append(Case("pool", f"max_pool {c}@{h}", lambda fw, c=c, h=h: (
            fw[1].MaxPool2d(2), [fw[0].randn(1, c, h, h)])))
    return cases


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


def _gelu_add(fw):
    class GeluAdd(fw[3]):
        def forward(self, x):
            return fw[2].gelu(x) + x

    return GeluAdd()


def calibrate(*, engine: str = "flopcount", device: str = "cpu", base: str | None = None, quick: bool = False,
              repeat: int = 5, progress: Callable[[int, int, str], None] | None = None):
    """Run the suite on ``engine`` and return the calibrated profile (not saved)."""
    if engine not in ENGINES:
        raise FlopcountError(f"calibrate: engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    if device != "cpu":
        raise FlopcountError(f"calibrate: device {device!r} is not calibrated yet; run it on the CPU (cpu)")
    fw = _frameworks(engine)
    profile = hardware_profile(base or device)
    cases = _suite(quick)
    points: dict = {}
    with tempfile.TemporaryDirectory(prefix="flopcount-calibrate-") as folder:
        for i, case in enumerate(cases):
            if progress is not None:
                progress(i, len(cases), case.label)
            report = _timed(case, fw, engine, folder, repeat=repeat, hardware=profile, device=device)
            _add_points(points, report)
    curves = {kind: _curve(p) for kind, p in points.items()}
    if FALLBACK not in curves:
        raise FlopcountError("calibrate: no elementwise op was timed; the suite did not run")
    meta = {"engine": engine, "device": device, "base": profile.name, "quick": quick, "repeat": repeat,
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, {platform.system()}",
            "versions": _versions(engine), "load_average": os.getloadavg()[0] if hasattr(os, "getloadavg") else None}
    name = f"{profile.name}-{engine}"
    return profile.with_(name=name, title=f"{profile.title}, calibrated with {engine}", curves=curves,
                         calibration=meta)


def _timed(case: Case, fw, engine: str, folder: str, **options):
    """The case's report with per-op times on ``engine``; onnxruntime times the case's ONNX export."""
    module, inputs = case.build(fw)
    module = module.eval()
    if engine == "onnxruntime":
        from .runtime import onnx as onnx_io

        path = os.path.join(folder, f"case-{abs(hash(case.label))}.onnx")
        onnx_io.export(module, path, *inputs)
        return api.profile(path, *inputs, latency=True, warmup=1, engine=engine, **options)
    return api.profile(module, *inputs, latency=True, warmup=1, engine=engine, **options)


def _add_points(points: dict, report) -> None:
    """(roofline seconds, measured seconds) of every timed op, by op class."""
    for record in report.by_op("forward"):
        if record.latency_ms and record.roofline_ms is not None:
            kind = op_class(record.op, record.input_shapes) if record.roofline_ms > 0 else VIEW
            points.setdefault(kind, []).append((record.roofline_ms / 1e3, record.latency_ms / 1e3))


def _curve(points: list) -> tuple:
    """Points sorted by roofline time, those at the same roofline time merged (their median)."""
    merged: dict = {}
    for roofline_s, measured_s in points:
        merged.setdefault(float(f"{roofline_s:.6g}"), []).append(measured_s)
    return tuple((x, float(np.median(ys))) for x, ys in sorted(merged.items()))


def _versions(engine: str) -> dict:
    out = {"flopcount": __version__, "numpy": np.__version__, "python": platform.python_version()}
    if engine == "torch":
        import torch

        out["torch"] = torch.__version__
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


__all__ = ["calibrate", "save", "default_path", "ENGINES"]
