"""Profiling leaves the model exactly as it was: parameters, buffers, gradients, requires_grad,
training flags and hooks, in both views, with and without backward and latency, also when the
model raises halfway through a run; and the runtime's own state (grad mode, observers, global
hooks, scope stack, tracer) is back to what it was."""

from __future__ import annotations

import numpy as np
import pytest

import flopcount
import flopcount.runtime as rt
from flopcount.runtime import dispatch
from flopcount.runtime.nn.modules import module as module_mod

nn = rt.nn


class Tripwire(nn.Module):
    """Identity until its ``trip``-th call, which raises (a model failing mid-run)."""

    def __init__(self):
        super().__init__()
        self.calls = 0
        self.trip = None

    def forward(self, x):
        self.calls += 1
        if self.trip is not None and self.calls >= self.trip:
            raise RuntimeError(f"tripped on call {self.calls}")
        return x


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.drop = nn.Dropout(0.5)
        self.wire = Tripwire()
        self.fc = nn.Linear(4 * 6 * 6, 5)

    def forward(self, x):
        y = self.drop(self.bn(self.conv(x)).relu())
        return self.fc(self.wire(y).flatten(1))


def _model() -> Net:
    net = Net()
    net.train()
    net.bn.eval()                      # mixed flags must come back mixed
    net.conv.bias.requires_grad = False
    net.fc.weight.grad = rt.ones(*net.fc.weight.shape)   # a gradient from the user's own step
    net.bn.running_mean.data[:] = 0.25
    seen = []
    net.fc.register_forward_hook(lambda m, i, o: seen.append("fc"))
    net.conv.register_forward_pre_hook(lambda m, i: seen.append("conv"))
    return net


def _snapshot(net: Net) -> dict:
    def array(t):
        return None if t is None else np.array(t.numpy(), copy=True)

    return {
        "params": {n: (array(p), p.requires_grad, array(p.grad), id(p)) for n, p in net.named_parameters()},
        "buffers": {n: (array(b), id(b)) for n, b in net.named_buffers()},
        "training": {n: m.training for n, m in net.named_modules()},
        "hooks": {n: (dict(m._forward_hooks), dict(m._forward_pre_hooks)) for n, m in net.named_modules()},
        "runtime": _runtime_state(),
    }


def _runtime_state() -> tuple:
    st = dispatch.state
    return (st.grad_enabled, st.observers, st.timing, st.tracer, list(st.scope_stack), st.phase,
            str(st.default_device), st.backward_module, dict(module_mod._global_forward_hooks),
            dict(module_mod._global_forward_pre_hooks), rt.get_mode() if hasattr(rt, "get_mode") else None)


def _same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for section in a:
        if section in ("params", "buffers"):
            assert a[section].keys() == b[section].keys()
            for name in a[section]:
                for x, y in zip(a[section][name], b[section][name]):
                    if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
                        assert x is not None and y is not None and np.array_equal(x, y), (section, name)
                    else:
                        assert x == y, (section, name, x, y)
        else:
            assert a[section] == b[section], section


RUNS = [dict(mode=m, backward=b, latency=lat) for m in ("eager", "graph") for b in (False, True)
        for lat in (False, True)]


@pytest.mark.parametrize("options", RUNS, ids=lambda o: "-".join(f"{k}={v}" for k, v in o.items()))
def test_a_profile_leaves_the_model_as_it_was(options):
    net = _model()
    before = _snapshot(net)
    flopcount.profile(net, rt.randn(2, 3, 6, 6), repeat=1, **options)
    _same(before, _snapshot(net))


@pytest.mark.parametrize("trip", [1, 2, 3])
@pytest.mark.parametrize("options", RUNS, ids=lambda o: "-".join(f"{k}={v}" for k, v in o.items()))
def test_a_run_that_fails_halfway_leaves_the_model_as_it_was(options, trip):
    """The tripwire sits after conv, batch norm and dropout have run (and in training mode,
    updated the running statistics): the model raises on its first, second or third call,
    i.e. in the counting run or in the timed or backward runs that follow."""
    net = _model()
    before = _snapshot(net)
    net.wire.trip = trip
    try:
        flopcount.profile(net, rt.randn(2, 3, 6, 6), repeat=2, warmup=1, **options)
    except RuntimeError as exc:
        assert "tripped" in str(exc)
    net.wire.trip = None
    _same(before, _snapshot(net))


def test_a_shape_error_halfway_leaves_the_model_as_it_was():
    net = _model()
    before = _snapshot(net)
    for mode in ("eager", "graph"):
        with pytest.raises(flopcount.ShapeError, match="linear"):
            flopcount.profile(net, rt.randn(2, 3, 5, 5), mode=mode, backward=True)  # fc expects 6x6 maps
    _same(before, _snapshot(net))


class SelfChanging(nn.Module):
    """A forward that changes its own weights every way a module can: in place (a parameter and a
    buffer), by index, by rebinding a parameter and a buffer to new tensors, by replacing a
    registered parameter with a plain attribute, and by adding a submodule."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.scale = nn.Parameter(rt.ones(4))
        self.register_buffer("steps", rt.zeros(1))

    def forward(self, x):
        with rt.no_grad():
            self.fc.weight.mul_(2)
            self.steps.add_(1)
            self.steps[0] = 7.0
        self.steps = self.steps + 1
        self.fc.bias = nn.Parameter(rt.full((4,), 3.0))
        self.__dict__["scale"] = rt.zeros(4)   # a plain attribute hiding the parameter
        self.extra = nn.Linear(4, 4)
        return self.fc(x) * self.scale


@pytest.mark.parametrize("options", RUNS, ids=lambda o: "-".join(f"{k}={v}" for k, v in o.items()))
def test_a_forward_that_changes_its_own_weights_leaves_them_as_they_were(options):
    net = SelfChanging()
    arrays = {n: t.data for n, t in list(net.named_parameters()) + list(net.named_buffers())}
    values = {n: np.array(a, copy=True) for n, a in arrays.items()}
    objects = {n: t for n, t in list(net.named_parameters()) + list(net.named_buffers())}
    flopcount.profile(net, rt.randn(2, 4), repeat=1, **options)
    now = dict(list(net.named_parameters()) + list(net.named_buffers()))
    assert now.keys() == objects.keys() and all(now[n] is objects[n] for n in now)   # the same tensors
    assert [n for n, _ in net.named_modules()] == ["", "fc"]                           # no module added
    for name, t in now.items():
        assert t.data is arrays[name], name                  # its own array, never a copy swapped in
        assert np.array_equal(t.numpy(), values[name]), name
        assert t.data.flags.writeable, name                  # read-only only while profiling
    assert net.scale is objects["scale"]


def test_weights_are_not_copied_to_be_restored():
    """The restore costs no copy of the weights: the run reads the model's own arrays, and a
    write goes to a copy of the one array written."""
    net = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 64))
    weights = [p.data for p in net.parameters()]
    seen = []
    net[0].register_forward_hook(lambda m, i, o: seen.append(m.weight.data is weights[0]))
    flopcount.profile(net, rt.randn(2, 64), mode="eager")
    assert seen == [True] and all(p.data is w for p, w in zip(net.parameters(), weights))
