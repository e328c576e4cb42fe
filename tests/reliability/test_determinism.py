"""The same model and input give the same counts on every run, in every process and on every
device; latency numbers come with their spread (the minimum beside the median).

Only measured quantities (latency, measured memory) may differ between runs; everything else
in a report (MACs, FLOPs, bytes, params, predicted memory, rows, ops, their order) must not."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import flopcount
import flopcount.runtime as rt
from flopcount import models

MEASURED = ("latency", "_ms", "measured", "_per_second", "threads")  # FLOP/s and bytes/s follow from times; threads: how they were taken


def counts(report, drop=("device",)) -> dict:
    """The report as a dict without what is measured (or named in ``drop``)."""
    def strip(obj):
        if isinstance(obj, dict):
            return {k: strip(v) for k, v in obj.items() if not any(m in k for m in MEASURED) and k not in drop}
        if isinstance(obj, list):
            return [strip(v) for v in obj]
        return obj

    return strip(report.to_dict())


CASES = [("resnet18", dict(mode="graph")), ("resnet18", dict(mode="eager", backward=True)),
         ("gpt2", dict(mode="graph", backward=True)), ("gpt2", dict(mode="eager", convention="ptflops"))]


@pytest.mark.parametrize("name, options", CASES, ids=[f"{n}-{'-'.join(map(str, o.values()))}" for n, o in CASES])
def test_the_same_counts_on_every_run(name, options):
    shape = (1, 3, 64, 64) if name == "resnet18" else (1, 16)
    first = counts(flopcount.profile(name, input_shape=shape, device="meta", **options))
    for _ in range(2):
        assert counts(flopcount.profile(name, input_shape=shape, device="meta", **options)) == first


def test_real_data_and_meta_count_the_same():
    net = models.get("mobilenet_v2")
    x = rt.randn(1, 3, 64, 64)
    on_cpu = counts(flopcount.profile(net, x, backward=True))
    with rt.meta():
        meta_net = models.get("mobilenet_v2")
    on_meta = counts(flopcount.profile(meta_net, rt.empty(1, 3, 64, 64, device="meta"), backward=True))
    assert on_cpu == on_meta


def _cli_json(seed: str) -> dict:
    env = {**os.environ, "PYTHONHASHSEED": seed}
    out = subprocess.run([sys.executable, "-m", "flopcount", "vit_b_16", "--format", "json",
                          "--backward"], capture_output=True, text=True, env=env, timeout=300, check=True)
    return json.loads(out.stdout)


def test_the_same_counts_in_every_process():
    """String hashing differs between processes (PYTHONHASHSEED): no order or count may follow it."""
    a, b = _cli_json("1"), _cli_json("2")
    assert a == b


def test_latency_carries_its_spread():
    nn = rt.nn
    net = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 14 * 14, 10))
    for mode in ("eager", "graph"):
        report = flopcount.profile(net, rt.randn(1, 3, 16, 16), mode=mode, latency=True, repeat=3)
        assert 0 < report.latency_min_ms <= report.latency_ms
        timed = [r for r in report.rows if r.latency_ms is not None]
        assert timed and all(0 <= r.latency_min_ms <= r.latency_ms for r in timed)


@pytest.mark.gpu
@pytest.mark.parametrize("name, options", CASES, ids=[f"{n}-{'-'.join(map(str, o.values()))}" for n, o in CASES])
def test_the_same_counts_on_cpu_and_gpu(name, options):
    shape = (1, 3, 64, 64) if name == "resnet18" else (1, 16)
    on_cpu = counts(flopcount.profile(name, input_shape=shape, device="cpu", **options))
    on_gpu = [counts(flopcount.profile(name, input_shape=shape, device="cuda", **options)) for _ in range(2)]
    assert on_gpu[0] == on_gpu[1] == on_cpu


@pytest.mark.gpu
def test_gpu_latency_carries_its_spread():
    report = flopcount.profile("resnet18", input_shape=(1, 3, 64, 64), device="cuda", latency=True, repeat=3)
    assert 0 < report.latency_min_ms <= report.latency_ms
    assert np.isfinite(report.latency_ms)
