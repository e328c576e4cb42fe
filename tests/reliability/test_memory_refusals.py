"""Work predicted not to fit in memory is refused before it allocates, with the predicted figure:
a run for latency whose activations peak above what the process can take, and a zoo model whose
weights do not fit (``llama2_7b --latency`` under ``ulimit -v 6000000`` died with "out of
memory", exit 1). Counting alone needs shapes only and is never refused."""

from __future__ import annotations

import os
import resource
import subprocess
import sys

import numpy as np
import pytest

import flopcount
from flopcount.runtime import host_memory

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MIB = 1 << 20


def _expand_then_relu(path: str, shape: tuple) -> str:
    """x [1] expanded to ``shape`` (a broadcast view, no memory), then a Relu that writes it all."""
    pytest.importorskip("onnx")
    from bad_corpus import _array, _value, onnx_model
    from onnx import helper

    nodes = [helper.make_node("Expand", ["x", "shape"], ["big"], name="expand"),
             helper.make_node("Relu", ["big"], ["y"], name="relu")]
    model = onnx_model(nodes, [_value("x", (1,))], [_value("y", shape)], [_array("shape", np.array(shape, np.int64))])
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    return path


def _room(monkeypatch, n: int) -> None:
    monkeypatch.setattr(host_memory, "available", lambda: (n, "available memory"))


def test_a_latency_run_whose_activations_do_not_fit_is_refused_with_the_prediction(tmp_path, monkeypatch):
    path = _expand_then_relu(str(tmp_path / "expand.onnx"), (4, 1024, 1024))   # 16 MiB written by the Relu
    _room(monkeypatch, 8 * MIB)
    assert flopcount.profile(path).macs == 0                      # counting: shapes only, never refused
    with pytest.raises(flopcount.ShapeError) as info:
        flopcount.profile(path, latency=True, repeat=1, warmup=0)
    message = str(info.value)
    assert "predicted peak" in message and "about 16.0 MiB, more than the 8.0 MiB" in message, message
    _room(monkeypatch, 1 << 30)
    report = flopcount.profile(path, latency=True, repeat=1, warmup=0)
    assert report.latency_ms is not None and report.memory.predicted_peak == 16 * MIB


def test_a_zoo_model_whose_weights_do_not_fit_is_refused_before_it_is_built(monkeypatch):
    _room(monkeypatch, 10 * MIB)
    built = []
    from flopcount import models

    real_get = models.get
    monkeypatch.setattr(models, "get", lambda name, **kw: built.append(str(name)) or real_get(name, **kw))
    with pytest.raises(flopcount.ShapeError) as info:
        flopcount.profile("resnet18", latency=True, repeat=1, warmup=0)
    # resnet18: 11,689,512 float32 parameters and batch norm's buffers
    assert "resnet18's weights on the CPU: about 44.6 MiB, more than the 10.0 MiB" in str(info.value), info.value
    assert len(built) == 1                                          # the meta twin only
    assert "device 'meta'" in str(info.value)
    assert flopcount.profile("resnet18", device="meta").params == 11_689_512   # counting needs no room


def test_ulimit_v_is_what_the_process_can_still_use():
    script = ("import resource; from flopcount.runtime import host_memory as h; "
              "resource.setrlimit(resource.RLIMIT_AS, (h._mapped_now() + (300 << 20), resource.RLIM_INFINITY)); "
              "n, src = h.available(); print(n >> 20, src)")
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    room, source = done.stdout.split(maxsplit=1)
    assert 290 <= int(room) <= 300 and source.startswith("ulimit -v"), done.stdout + done.stderr


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ulimit -v as Linux applies it")
def test_llama2_7b_latency_under_ulimit_is_one_line_and_exit_2(tmp_path):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (6_000_000 * 1024, resource.RLIM_INFINITY))

    done = subprocess.run([sys.executable, "-m", "flopcount", "llama2_7b", "--latency", "-o", str(tmp_path / "r")],
                          env=env, capture_output=True, text=True, timeout=300, preexec_fn=limit)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert "llama2_7b's weights on the CPU: about 25.1 GiB" in lines[0], lines[0]
    assert "(ulimit -v" in lines[0] or "(available memory)" in lines[0], lines[0]   # whichever is smaller here
    assert os.listdir(tmp_path) == []
