"""Profiles from several threads at once give exactly the single-threaded results.

The runtime's run state (observers, grad mode, tracer, scope stack, default device, the
module-call observer) is per thread, so concurrent profiles of different models neither see nor
record each other's ops; two profiles of the same model object take turns.
"""

from __future__ import annotations

import threading

import pytest

import flopcount
import flopcount.runtime as rt
from flopcount import models

# (model, mode, device, input shape): different views and devices run side by side
CASES = [
    ("resnet18", "graph", "meta", None),
    ("shufflenet_v2_x0_5", "eager", "cpu", (1, 3, 64, 64)),
    ("squeezenet1_1", "graph", "cpu", (1, 3, 64, 64)),
    ("mobilenet_v3_small", "eager", "meta", None),
    ("resnet18", "eager", "cpu", (1, 3, 64, 64)),
    ("gpt2", "graph", "meta", None),
    ("shufflenet_v2_x0_5", "graph", "meta", None),
    ("squeezenet1_1", "eager", "cpu", (2, 3, 48, 48)),
]


def _summary(report) -> tuple:
    rows = tuple((r.name, r.macs, r.flops, r.params) for r in report.rows)
    return report.totals, rows, [str(u) for u in report.unsupported]


def _run(case, backward: bool = False):
    name, mode, device, shape = case
    return _summary(flopcount.profile(name, mode=mode, device=device, input_shape=shape, backward=backward))


def _in_threads(jobs: list) -> list:
    """Run every job in its own thread, all released at once; re-raise the first error."""
    results, errors = [None] * len(jobs), []
    barrier = threading.Barrier(len(jobs))

    def work(i, job):
        barrier.wait()
        try:
            results[i] = job()
        except BaseException as exc:  # noqa: BLE001  (handed to the main thread)
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i, job)) for i, job in enumerate(jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    assert not any(t.is_alive() for t in threads), "a profiling thread did not finish"
    if errors:
        raise errors[0]
    return results


def test_eight_threads_profiling_different_models_match_one_thread():
    expected = [_run(case) for case in CASES]
    got = _in_threads([lambda case=case: _run(case) for case in CASES])
    for case, want, have in zip(CASES, expected, got):
        assert have == want, f"{case}: a concurrent profile differs from the single-threaded one"


def test_threads_with_backward_and_grad_mode_do_not_leak_into_each_other():
    cases = [("resnet18", "graph", "cpu", (2, 3, 32, 32)), ("squeezenet1_1", "eager", "cpu", (2, 3, 48, 48))]
    expected = [_run(case, backward=True) for case in cases]

    def no_grad_forward():  # grad mode off in this thread only
        net = models.get("squeezenet1_1")
        with rt.no_grad():
            out = net(rt.randn(1, 3, 48, 48))
        return out.requires_grad, rt.is_grad_enabled()

    jobs = [lambda c=c: _run(c, backward=True) for c in cases] * 2 + [no_grad_forward] * 2
    got = _in_threads(jobs)
    for want, have in zip(expected * 2, got[:4]):
        assert have == want
    assert got[4:] == [(False, True)] * 2
    assert rt.is_grad_enabled()


def test_one_model_object_profiled_from_four_threads():
    net = models.get("resnet18")
    x = rt.randn(1, 3, 32, 32)
    state = {k: v.numpy().copy() for k, v in net.state_dict().items()}
    expected = {mode: _summary(flopcount.profile(net, x, mode=mode)) for mode in ("eager", "graph")}
    got = _in_threads([lambda mode=mode: (mode, _summary(flopcount.profile(net, x, mode=mode)))
                       for mode in ("eager", "graph", "eager", "graph")])
    for mode, summary in got:
        assert summary == expected[mode]
    for k, v in net.state_dict().items():
        assert (v.numpy() == state[k]).all(), f"{k} changed"


def test_default_device_and_trace_are_per_thread():
    inside = threading.Event()
    release = threading.Event()
    seen = {}

    def builds_on_meta():
        with rt.meta():
            inside.set()
            release.wait(30)
            seen["meta"] = rt.zeros(2).device.type

    thread = threading.Thread(target=builds_on_meta)
    thread.start()
    assert inside.wait(30)
    seen["main"] = rt.zeros(2).device.type      # the other thread's meta() is not ours
    graph = rt.trace(lambda t: t * 2, rt.ones(3))  # nor would our trace record its ops
    release.set()
    thread.join(30)
    assert seen == {"main": "cpu", "meta": "meta"}
    assert [n.op_name for n in graph.nodes] == ["mul"]


@pytest.mark.parametrize("mode", ["eager", "graph"])
def test_latency_runs_in_two_threads_time_only_their_own_model(mode):
    # per-module timing is an observer of the thread's own module calls, not a global hook
    nets = [models.get("squeezenet1_1"), models.get("shufflenet_v2_x0_5")]
    x = rt.randn(1, 3, 32, 32)
    reports = _in_threads([lambda n=n: flopcount.profile(n, x, mode=mode, latency=True, repeat=2) for n in nets])
    for net, report in zip(nets, reports):
        paths = {p for p, _ in net.named_modules()}
        timed = {r.name for r in report.rows if r.latency_ms is not None and r.kind != "op"}
        assert len(timed) > 10 and timed <= paths
