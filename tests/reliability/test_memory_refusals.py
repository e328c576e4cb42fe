"""Work predicted not to fit in memory is refused before it allocates, with the predicted figure:
a run for latency, measured memory or a training step whose activations peak above what the
process can take on its device (both views: predicted from a run on shapes only), and a zoo
model whose weights do not fit (``llama2_7b --latency`` under ``ulimit -v 6000000`` died with
"out of memory", exit 1). Counting in the graph view needs shapes only and is never refused; the
eager view counts by running the model on its tensors, unchecked (a second, shapes-only run of
the user's forward could change its Python state), and running out of memory there is one line,
exit 2, naming the graph view."""

from __future__ import annotations

import contextlib
import os
import resource
import subprocess
import sys
import tracemalloc
import types

import numpy as np
import pytest

import flopcount
import flopcount.runtime as rt
from flopcount import models
from flopcount.runtime import host_memory
from flopcount.runtime.registry import get_op

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


def test_onnxruntime_is_not_started_on_a_graph_whose_peak_does_not_fit(tmp_path, monkeypatch):
    pytest.importorskip("onnxruntime")
    from flopcount.engines import onnxruntime_engine

    path = _expand_then_relu(str(tmp_path / "expand.onnx"), (4, 1024, 1024))   # 16 MiB written by the Relu
    _room(monkeypatch, 8 * MIB)
    monkeypatch.setattr(onnxruntime_engine, "time_file", lambda *a, **k: pytest.fail("onnxruntime ran"))
    with pytest.raises(flopcount.MemoryLimitError, match=r"running expand.onnx in onnxruntime \(activations at "
                                                         r"their predicted peak\): about 16\.0 MiB, more than the 8\.0"):
        flopcount.profile(path, engine="onnxruntime", repeat=1, warmup=0)


def test_a_zoo_model_whose_weights_do_not_fit_is_refused_before_it_is_built(monkeypatch):
    _room(monkeypatch, 10 * MIB)
    built = []
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


# --- the eager view, user modules, native files, training steps, GPUs ----------------------------

N = 100_000
BIG = 4 * N * N   # an (N, N) float32 activation: 40 GB (37.3 GiB)


class _Outer(rt.nn.Module):
    """x (1, N) broadcast to (N, N) and scaled: a 40 GB output from a 400 KB input."""

    def __init__(self):
        super().__init__()
        self.scale = rt.nn.Parameter(rt.ones(1))

    def forward(self, x):
        return x.expand(x.shape[1], x.shape[1]) * self.scale


@pytest.fixture
def mul_kernel(monkeypatch):
    """The CPU kernel of ``mul``, wrapped: every output shape it computed is noted, and one larger
    than 64 MiB fails the test instead of allocating."""
    op = get_op("mul")
    real = op._kernel_by_device["cpu"]
    shapes = []

    def guarded(xp, *arrays, **attrs):
        shape = np.broadcast_shapes(*(np.shape(a) for a in arrays))
        shapes.append(shape)
        assert 4 * int(np.prod(shape)) <= 64 * MIB, f"mul ran on {shape}"
        return real(xp, *arrays, **attrs)

    monkeypatch.setitem(op._kernel_by_device, "cpu", guarded)
    return shapes


@pytest.mark.parametrize("mode", ["eager", "graph"])
@pytest.mark.parametrize("run", [dict(latency=True, repeat=1, warmup=0), dict(measure_memory=True),
                                 dict(backward=True)], ids=["latency", "measure_memory", "backward"])
def test_a_module_whose_activation_would_be_40_gb_is_refused_before_any_kernel_runs(monkeypatch, mul_kernel,
                                                                                     mode, run):
    _room(monkeypatch, 1 << 30)
    tracemalloc.start()
    try:
        with pytest.raises(flopcount.MemoryLimitError) as info:
            flopcount.profile(_Outer(), rt.randn(1, N), mode=mode, **run)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    message = str(info.value)
    # a training step keeps the output for backward while the gradient of mul's input, (N, N)
    # too, is computed: twice the forward's peak
    what, need = ("a training step of", 2 * BIG) if run.get("backward") else ("running", BIG)
    assert f"{what} _Outer (activations at their predicted peak): about {need / 2**30:.1f} GiB, more than " \
           f"the 1.0 GiB this process can still use (available memory)" in message, message
    assert mul_kernel == [] and peak < 64 * MIB


@pytest.mark.parametrize("mode", ["eager", "graph"])
def test_a_model_that_fits_still_runs_with_the_check(monkeypatch, mul_kernel, mode):
    _room(monkeypatch, 1 << 30)
    report = flopcount.profile(_Outer(), rt.randn(1, 64), mode=mode, latency=True, repeat=1, warmup=0,
                               backward=True, measure_memory=True)
    assert report.latency_ms is not None and (64, 64) in mul_kernel
    assert report.memory.training_predicted_peak >= 4 * 64 * 64


def test_the_training_step_is_checked_against_its_own_peak_above_inference(monkeypatch):
    """resnet18 at batch 4: inference fits in 60 MiB, its training step (autograd keeps every
    layer's activations: about 51 MB an image) does not."""
    _room(monkeypatch, 60 * MIB)
    report = flopcount.profile("resnet18", batch=4, latency=True, repeat=1, warmup=0)
    assert report.latency_ms is not None and report.memory.predicted_peak < 60 * MIB
    for mode in ("eager", "graph"):
        with pytest.raises(flopcount.ShapeError, match=r"a training step of resnet18 \(activations at their "
                                                       r"predicted peak\): about 0\.2 GiB, more than the 60\.0 MiB"):
            flopcount.profile("resnet18", mode=mode, batch=4, backward=True, device="cpu")


def test_the_prediction_is_the_peak_the_real_run_then_reports(monkeypatch):
    """The shapes-only run goes through the same ops as the real one: same prediction."""
    from flopcount.eager_hooks.profiler import run_step
    from flopcount.recording import memory as mem
    from flopcount.recording.recorder import Recorder

    net, x = models.get("resnet18"), rt.randn(2, 3, 224, 224)
    report = flopcount.profile(net, x, mode="eager", backward=True)   # predicted, then run
    assert all(p.grad is None and p.device.type == "cpu" for p in net.parameters())   # left as it was
    net.train(True)
    before = mem.predict_before_running(lambda: run_step(net, (x,), {}, True), Recorder(net, [x]), training=True)
    assert before == report.memory.training_predicted_peak


def test_a_native_file_is_refused_in_both_steps(tmp_path, monkeypatch, mul_kernel):
    path = str(tmp_path / "outer.safetensors")
    rt.save(_Outer(), path, example_inputs=(rt.randn(1, N),))
    _room(monkeypatch, 1 << 30)
    for run, expected in ((dict(latency=True), r"running outer.safetensors .*: about 37\.3 GiB"),
                          (dict(backward=True), r"a training step of outer.safetensors .*: about 74\.5 GiB")):
        with pytest.raises(flopcount.ShapeError, match=expected + r", more than the 1\.0 GiB"):
            flopcount.profile(path, **run)
    assert mul_kernel == []
    assert flopcount.profile(path).flops == N * N     # counting alone is never refused


def test_a_model_that_reads_values_cannot_be_predicted_and_runs_as_before(monkeypatch):
    class Gate(rt.nn.Module):
        def forward(self, x):
            return x * 2 if float(x.sum()) > 0 else x   # a value: unknown on shapes alone

    _room(monkeypatch, 1)    # one byte: any prediction would be refused
    report = flopcount.profile(Gate(), rt.ones(2, 3), mode="eager", latency=True, repeat=1, warmup=0)
    assert report.latency_ms is not None


def test_on_a_gpu_the_free_device_memory_is_the_limit(monkeypatch):
    """No GPU here: the free-memory reader is replaced; the figure it reads is CuPy's."""
    monkeypatch.setattr(host_memory, "gpu_available", lambda device: (2 << 30, f"free on {device}"))
    with pytest.raises(flopcount.ShapeError, match=r"about 37\.3 GiB, more than the 2\.0 GiB this process can "
                                                   r"still use \(free on cuda:0\)"):
        host_memory.check_fits(BIG, "running _Outer", "use smaller inputs", device=rt.device("cuda:0"))
    host_memory.check_fits(1 << 30, "running _Outer", "use smaller inputs", device=rt.device("cuda:0"))
    host_memory.check_fits(BIG, "counting", "", device=rt.device("meta"))   # meta allocates nothing


def test_a_zoo_model_whose_weights_do_not_fit_on_the_gpu_is_refused_before_it_is_built(monkeypatch):
    from flopcount import loading

    monkeypatch.setattr(host_memory, "gpu_available", lambda device: (10 * MIB, f"free on {device}"))
    with pytest.raises(flopcount.ShapeError, match=r"resnet18's weights on cuda:0: about 44\.6 MiB, more than the "
                                                   r"10\.0 MiB this process can still use \(free on cuda:0\)"):
        loading.load_zoo("resnet18", rt.device("cuda:0"))


def test_the_gpu_figure_is_read_for_a_device_given_as_text(monkeypatch):
    """The loaders pass the device as the user typed it ("cuda"); the reader parses it."""
    device_module = sys.modules["flopcount.runtime.device"]  # the package's ``device`` is the function
    stand_in = types.SimpleNamespace(per_device=False, free_memory=lambda: 5 << 30)
    monkeypatch.setitem(device_module._BACKENDS, "cuda", stand_in)
    assert host_memory.gpu_available("cuda") == (5 << 30, "free on cuda")
    assert host_memory.available_on("cuda:0") == (5 << 30, "free on cuda:0")


def test_the_gpu_figure_is_cupys_free_memory_and_its_pool():
    from flopcount.runtime.cuda.backend import CUDABackend

    runtime = types.SimpleNamespace(memGetInfo=lambda: (3 << 30, 80 << 30), getDevice=lambda: 0)
    pool = types.SimpleNamespace(free_bytes=lambda: 1 << 30)
    cupy = types.SimpleNamespace(cuda=types.SimpleNamespace(runtime=runtime, Device=lambda i: contextlib.nullcontext()),
                                 get_default_memory_pool=lambda: pool)
    assert CUDABackend(cupy).free_memory() == 4 << 30


def _outer_command(tmp_path, *options):
    """``flopcount outer.py:build -i 1,N OPTIONS`` (a 40 GB activation from a 400 KB input) under
    ``ulimit -v 6000000``: the process and its stderr lines."""
    script = tmp_path / "outer.py"
    script.write_text("import flopcount.runtime as rt\n\n"
                      "class Outer(rt.nn.Module):\n"
                      "    def forward(self, x):\n"
                      "        return x.expand(x.shape[1], x.shape[1]) * 2\n\n"
                      "def build():\n    return Outer()\n")
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (6_000_000 * 1024, resource.RLIM_INFINITY))

    done = subprocess.run([sys.executable, "-m", "flopcount", f"{script}:build", "-i", f"1,{N}", *options],
                          env=env, capture_output=True, text=True, timeout=300, preexec_fn=limit)
    return done, done.stderr.strip().splitlines()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ulimit -v as Linux applies it")
def test_the_command_line_refuses_a_40_gb_module_in_one_line_with_exit_2(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    done, lines = _outer_command(tmp_path, "--latency", "--mode", "eager", "-o", str(out / "r.json"))
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert "running outer.py:build (activations at their predicted peak): about 37.3 GiB" in lines[0], lines[0]
    assert os.listdir(out) == []


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ulimit -v as Linux applies it")
def test_an_eager_count_out_of_memory_is_one_line_naming_the_graph_view(tmp_path):
    done, lines = _outer_command(tmp_path, "--mode", "eager")
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert "out of memory running the model on its tensors; count with the graph view (--mode graph" in lines[0]
