"""engine="torch": the user's PyTorch model timed by PyTorch module by module, joined with
flopcount's counts of the same model (timings are checked for structure, never for speed)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import flopcount  # noqa: E402
from flopcount.engines import torch_engine  # noqa: E402
from flopcount.report.export import to_dict  # noqa: E402
from flopcount.runtime.errors import DeviceError, FlopcountError  # noqa: E402


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.features = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.Conv2d(8, 8, 3))
        self.act = torch.nn.ReLU()
        self.head = torch.nn.Linear(8, 4)

    def forward(self, x):
        y = self.act(self.features(x))
        return self.head(self.act(y).mean((2, 3)))   # act runs twice: its time is the sum


def test_module_rows_get_pytorch_times_beside_flopcount_counts():
    model, x = Net().train(), torch.randn(2, 3, 16, 16)
    counted = flopcount.profile(model, x)
    timed = flopcount.profile(model, x, engine="torch", repeat=3)
    assert timed.engine == "torch" and counted.engine == "flopcount"
    assert (timed.macs, timed.flops, timed.params) == (counted.macs, counted.flops, counted.params)
    assert timed.latency_ms > 0 and timed.latency_min_ms <= timed.latency_ms
    for path in ("", "features", "features.0", "features.1", "features.2", "act", "head"):
        row = timed.row(path)
        assert row.latency_ms > 0 and row.latency_min_ms <= row.latency_ms, path
        assert row.flops_per_second == row.flops / (row.latency_ms / 1e3)
    # op rows: PyTorch's profiler times of the ATen nodes they were converted from
    assert all(r.latency_ms > 0 for r in timed.rows if r.kind == "op" and r.flops)
    assert model.training   # put back
    assert not any(m._forward_hooks or m._forward_pre_hooks for m in model.modules())
    assert to_dict(timed)["engine"] == "torch"


def test_op_views_get_pytorch_profiler_times_joined_by_node():
    model, x = Net().eval(), torch.randn(2, 3, 16, 16)
    timed = flopcount.profile(model, x, engine="torch", repeat=2)
    records = timed.by_op("forward")
    counted = [r for r in records if r.macs or r.flops]
    assert counted and all(r.latency_ms is not None and r.latency_ms > 0 for r in counted)
    assert all(r.source for r in counted)                       # joined by the ATen node's name
    # the op-type view sums its records' times
    for summary in timed.by_op_type():
        mine = [r.latency_ms for r in records if r.op == summary.op and r.latency_ms is not None]
        assert summary.latency_ms == pytest.approx(sum(mine)) if mine else summary.latency_ms is None
    assert any(n.startswith(torch_engine.OPS_NOTE) and f"{len(counted)} of the {len(counted)} ops" in n
               for n in timed.notes)
    op_view = timed.tabulate("plain", by="op")
    conv_line = next(line for line in op_view.splitlines() if line.split()[1:2] == ["conv"])
    assert conv_line.split()[-3] in ("µs", "ms")                # a Latency cell, not "-"


class Chain(torch.nn.Module):
    def forward(self, x):
        a = torch.relu(x)
        b = a + a
        return (b * a).sum()


def test_the_node_by_node_run_frees_each_output_after_its_last_reader(monkeypatch):
    # kept to the end of the run, every output made the late nodes allocate fresh memory
    captured = torch_engine.capture_graph(Chain(), (torch.randn(4, 8),), {})
    nodes = [n for n in captured.graph.nodes if n.op == "call_function"]
    assert [str(n.target).split(".")[1] for n in nodes] == ["relu", "add", "mul", "sum"]
    relu, add, mul, total = (n.name for n in nodes)
    assert torch_engine.release_plan(nodes) == [[], [], [relu, add], [mul, total]]
    # and the run holds them no longer: a weak reference to each output dies when the plan says
    import weakref

    alive_after: dict = {}
    refs: dict = {}
    real = {n.name: n.target for n in nodes}
    for index, node in enumerate(nodes):
        def target(*args, _name=node.name, _index=index, **kwargs):
            alive_after[_index - 1] = {name for name, ref in refs.items() if ref() is not None}
            out = real[_name](*args, **kwargs)
            refs[_name] = weakref.ref(out)
            return out
        monkeypatch.setattr(node, "target", target)
    times = torch_engine.time_captured(captured, (torch.randn(4, 8),), {}, repeat=1)
    assert set(times) == {relu, add, mul, total}
    assert alive_after[1] == {relu, add} and alive_after[2] == {mul}   # relu and add freed after mul


def test_op_rows_say_why_they_have_no_times_when_the_graph_cannot_run(monkeypatch):
    from flopcount.runtime.torch import capture

    real, calls = capture.capture, []

    def refuse_the_second(*args, **kwargs):   # the first is flopcount's own capture, for counting
        calls.append(1)
        if len(calls) > 1:
            raise RuntimeError("no")
        return real(*args, **kwargs)

    model, x = Net().eval(), torch.randn(1, 3, 16, 16)
    counted = flopcount.profile(model, x)
    monkeypatch.setattr(capture, "capture", refuse_the_second)
    timed = flopcount.profile(model, x, engine="torch", repeat=1)
    assert all(r.latency_ms is None for r in timed.by_op("forward"))
    assert "op rows have no PyTorch times: capturing it again failed (RuntimeError)" in timed.notes
    assert timed.row("head").latency_ms > 0 and timed.macs == counted.macs   # module times stand


def test_times_come_from_one_run_so_children_fit_in_their_parent():
    """Inclusive times of the median run: a module's children ran inside its own span."""
    model = Net()
    times = torch_engine.time_module(model, (torch.randn(1, 3, 16, 16),), {}, warmup=1, repeat=5)
    modules = times.modules
    assert modules["features"][0] >= sum(modules[f"features.{i}"][0] for i in range(3))
    assert modules[""][0] >= modules["features"][0] + modules["act"][0] + modules["head"][0]


def test_engine_torch_needs_a_pytorch_model_with_weights():
    with pytest.raises(FlopcountError, match=r"engine 'torch' times a PyTorch model; resnet18 is not one"):
        flopcount.profile("resnet18", engine="torch")
    with torch.device("meta"):
        model = Net()
    with pytest.raises(DeviceError, match=r"is on torch's meta device"):
        flopcount.profile(model, input_shape=(1, 3, 16, 16), engine="torch")
    with pytest.raises(FlopcountError, match=r"engine must be one of flopcount, torch, onnxruntime, jax, got 'tvm'"):
        flopcount.profile(Net(), torch.randn(1, 3, 16, 16), engine="tvm")
    with pytest.raises(FlopcountError, match=r"engine 'torch' times the PyTorch model as it is.*dtype='bfloat16'"):
        flopcount.profile(Net(), torch.randn(1, 3, 16, 16), engine="torch", dtype="bf16")


def test_the_profilers_own_lines_do_not_reach_the_user(tmp_path):
    # PyTorch's profiler prints 'USDT:... profiler_start/stop' from C++ on fd 2; a fresh process
    # shows what a user's terminal would
    import subprocess
    import sys

    source = tmp_path / "net.py"
    source.write_text("import torch\n\ndef build():\n    return torch.nn.Sequential(torch.nn.Linear(8, 8))\n")
    done = subprocess.run([sys.executable, "-m", "flopcount", f"{source}:build", "-i", "2x8", "--latency",
                           "--engine", "torch", "--repeat", "2", "--by", "op", "-q"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "USDT" not in done.stderr and "USDT" not in done.stdout
    assert "linear" in done.stdout


def test_lines_kept_from_stderr_are_only_the_named_ones(capfd):
    import os

    from flopcount.engines.native_stderr import without_lines

    with without_lines("USDT:"):
        os.write(2, b"USDT:2026 profiler_start\nsomething else\n")
    assert capfd.readouterr().err == "something else\n"


def test_a_one_thread_cpu_run_reads_the_threads_own_cpu_clock(monkeypatch):
    # modules, whole forwards and ATen nodes are all timed by runtime.clock: on one thread the
    # thread's CPU time (neighbours on the machine do not inflate it), on more the wall
    from flopcount.runtime import clock

    seen = []
    real = clock.read
    monkeypatch.setattr(clock, "read", lambda: seen.append(clock.current()) or real())
    timed = flopcount.profile(Net().eval(), torch.randn(2, 3, 16, 16), engine="torch", repeat=2, threads=1)
    assert seen and set(seen) == {clock.THREAD_CPU} and timed.threads.clock == clock.THREAD_CPU
    assert all(r.latency_ms > 0 for r in timed.rows if r.kind == "op" and r.flops)
    seen.clear()
    timed = flopcount.profile(Net().eval(), torch.randn(2, 3, 16, 16), engine="torch", repeat=2, threads=2)
    assert seen and set(seen) == {clock.WALL} and timed.threads.clock == clock.WALL
