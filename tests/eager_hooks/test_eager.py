"""The eager view on small hand-built models: attribution, coverage, parameters, no trace left."""

import numpy as np
import pytest

import flopcount
import flopcount.runtime as rt
from flopcount import conventions
from flopcount.eager_hooks import profile_eager
from flopcount.runtime.dispatch import state
from flopcount.runtime.nn.modules import module as module_mod

nn = rt.nn


class Residual(nn.Module):
    """fc2(relu(fc1(x))) + x, then x @ x.T: a residual add and a matmul in forward itself."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(16, 8)

    def forward(self, x):
        y = self.fc2(self.act(self.fc1(x))) + x
        return y @ y.T


FC1 = 4 * 8 * 16        # MACs of fc1 on 4 rows
FC2 = 4 * 16 * 8
GRAM = 4 * 8 * 4        # (4, 8) @ (8, 4)


def test_flopcount_counts_the_functional_part():
    report = profile_eager(Residual(), (rt.randn(4, 8),))
    root = report.root
    assert root.macs == FC1 + FC2 + GRAM
    # FLOPs: 2/MAC + biases (64 + 32) + relu (64) + the residual add (32)
    assert root.flops == 2 * (FC1 + FC2 + GRAM) + 64 + 32 + 64 + 32
    assert (root.functional_macs, root.functional_flops) == (GRAM, 2 * GRAM + 32)
    # a module costs the ops it runs: fc1's own forward runs its linear
    fc1 = report.row("fc1")
    assert (fc1.counted_by, fc1.macs, fc1.functional_macs) == ("ops", FC1, FC1)
    assert not report.seen_not_counted


def test_ptflops_lists_the_functional_part_as_seen_not_counted():
    report = profile_eager(Residual(), (rt.randn(4, 8),), convention="ptflops")
    # Linear: rows·(in·out + out); ReLU: numel
    assert report.macs == 4 * (8 * 16 + 16) + 64 + 4 * (16 * 8 + 8)
    assert [o.op for o in report.seen_not_counted] == ["add", "permute", "matmul"]  # y.T is a permute
    assert report.totals["seen_not_counted_macs"] == 32 + GRAM  # ptflops' op rules price the gap
    assert report.root.functional_macs == 0


def test_a_module_rule_covers_its_subtree():
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = nn.Linear(4, 4)

        def forward(self, x):
            return self.inner(x) * 2

    conv = conventions.get("flopcount").with_modules({Block: lambda m, i, o: rt.Cost(macs=7, flops=9)})
    net = nn.Sequential(Block(), nn.Linear(4, 2))
    report = profile_eager(net, (rt.randn(3, 4),), convention=conv)
    assert report.row("0").counted_by == "rule" and (report.row("0").macs, report.row("0").flops) == (7, 9)
    inner = report.row("0.inner")
    assert inner.counted_by == "covered" and inner.macs == 3 * 4 * 4  # shown with its own value
    assert report.macs == 7 + 3 * 4 * 2  # not added again


def test_ignored_modules_count_zero():
    conv = conventions.get("flopcount").with_modules(ignore=(nn.Linear,))
    report = profile_eager(Residual(), (rt.randn(4, 8),), convention=conv)
    assert report.row("fc1").macs == 0 and report.macs == GRAM


def test_parameters_shared_once_trainable_and_frozen_apart():
    shared = nn.Linear(4, 4)
    net = nn.Sequential(shared, nn.ReLU(), shared, nn.Linear(4, 2))
    net[3].weight.requires_grad_(False)
    report = profile_eager(net, (rt.randn(2, 4),))
    assert report.params == 20 + 10
    assert (report.root.trainable_params, report.root.frozen_params) == (20 + 2, 8)
    assert report.row("0").calls == 2 and report.row("0").macs == 2 * 2 * 16  # both calls
    assert report.row("0").params_own == 20 and report.root.params_own == 0


def test_module_list_rolls_up_its_children():
    class Stack(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])

        def forward(self, x):
            for layer in self.layers:
                x = layer(x)
            return x

    report = profile_eager(Stack(), (rt.randn(2, 4),))
    assert report.row("layers").calls == 0
    assert report.row("layers").macs == 3 * 2 * 16 == report.macs


def test_constant_only_ops_are_folded():
    class Masked(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)

        def forward(self, x):
            mask = rt.ones(4, 4).tril()      # from constants only: a trace folds it
            return self.fc(x) + mask

    report = profile_eager(Masked(), (rt.randn(4, 4),))
    assert [o.op for o in report.folded] == ["tril"]
    assert report.flops == 2 * 64 + 16 + 16  # linear, bias, the add; not the tril
    graph = flopcount.profile(Masked(), rt.randn(4, 4), mode="graph")
    assert graph.flops == report.flops


def test_ops_of_an_unregistered_module_go_to_its_caller():
    class Outer(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)

        def forward(self, x):
            return nn.ReLU()(self.fc(x))  # made on the fly: not part of the model's tree

    report = profile_eager(Outer(), (rt.randn(2, 4),))
    assert report.root.functional_flops == 8
    assert [r.name for r in report.rows] == ["", "fc"]


def _hook_state():
    return (len(module_mod._global_forward_pre_hooks), len(module_mod._global_forward_hooks),
            state.call_observer, state.observers, state.timing, state.grad_enabled, list(state.scope_stack))


def _snapshot(model):
    return ({k: v.numpy().copy() for k, v in model.state_dict().items()},
            [(m.training, len(m._forward_hooks), len(m._forward_pre_hooks)) for m in model.modules()],
            [(p.requires_grad, p.grad) for p in model.parameters()],
            [t._trace for t in list(model.parameters()) + list(model.buffers())])  # the recorder's notes go


@pytest.mark.parametrize("mode", ["eager", "graph"])
@pytest.mark.parametrize("backward", [False, True])
def test_profiling_leaves_no_trace(mode, backward):
    net = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Dropout(0.5), nn.Linear(8, 2))
    net[0].weight.requires_grad_(False)
    net.train()
    before, hooks = _snapshot(net), _hook_state()
    flopcount.profile(net, rt.randn(6, 4), mode=mode, backward=backward, latency=True, repeat=2,
                      measure_memory=True)
    after = _snapshot(net)
    assert _hook_state() == hooks
    assert before[1:] == after[1:]
    assert before[0].keys() == after[0].keys()
    for k in before[0]:
        np.testing.assert_array_equal(before[0][k], after[0][k], err_msg=k)


def test_hooks_and_observer_go_when_the_forward_raises():
    class Broken(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)

        def forward(self, x):
            self.fc(x)
            raise RuntimeError("boom")

    net = Broken()
    hooks = _hook_state()
    with pytest.raises(RuntimeError, match="boom"):
        profile_eager(net, (rt.randn(2, 4),))
    assert _hook_state() == hooks and net.training
    assert all(p._trace is None for p in net.parameters())


def test_a_tensor_kept_from_an_earlier_run_is_a_constant_in_the_next():
    class Cached(nn.Module):
        """Keeps its first run's activation and adds it in every later run."""

        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)
            self.kept = None

        def forward(self, x):
            y = self.fc(x)
            if self.kept is None:
                self.kept = y
                return y
            return y + self.kept * 2  # from a constant only: folded, as a trace would

    net = Cached()
    x = rt.randn(2, 4)
    first = profile_eager(net, (x,))
    second = profile_eager(net, (x,))
    assert first.flops == 2 * 2 * 16 + 8                       # linear and its bias
    assert second.flops == first.flops + 8                     # the add counts: x reaches it
    assert [o.op for o in second.folded] == ["mul"]
    assert flopcount.profile(net, x, mode="graph").flops == second.flops
    adds = [o for o in second.ops if o.op == "add"]
    assert len(adds) == 1 and adds[0].counted and adds[0].input_shapes == ((2, 4), (2, 4))


def test_backward_gemm_rule():
    # first layer: its input needs no gradient, so only the weight gradient (1x); the second
    # layer needs both (2x)
    net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    report = profile_eager(net, (rt.randn(5, 8),), backward=True)
    first, second = 5 * 8 * 16, 5 * 16 * 4
    assert report.row("0").backward_macs == first
    assert report.row("2").backward_macs == 2 * second
    assert report.totals["backward_macs"] == first + 2 * second
    assert report.totals["training_macs"] == 2 * first + 3 * second
    assert report.row("1").backward_flops > 0  # the ReLU mask is attributed to the ReLU


def test_latency_rows():
    net = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 8))
    report = profile_eager(net, (rt.randn(16, 32),), latency=True, repeat=3)
    assert report.latency_ms > 0 and report.latency_min_ms <= report.latency_ms
    for name in ("0", "1", "2"):
        row = report.row(name)
        assert 0 < row.latency_min_ms <= row.latency_ms
    # spans nest: in every run the model's span holds its children's
    assert report.root.latency_min_ms >= max(report.row(n).latency_min_ms for n in ("0", "1", "2"))
    assert all(o.latency_ms is not None for o in report.ops)
    assert sum(o.latency_ms for o in report.ops) < 3 * report.latency_ms


def test_meta_model_counts_like_cpu():
    with rt.meta():
        meta_net = Residual()
    cpu = profile_eager(Residual(), (rt.randn(4, 8),))
    meta = profile_eager(meta_net, (rt.empty(4, 8, device="meta"),), backward=True)
    assert (meta.macs, meta.flops, meta.params) == (cpu.macs, cpu.flops, cpu.params)
    assert meta.device == "meta" and meta.memory.measured_peak is None
    assert meta.totals["backward_macs"] == FC1 + 2 * FC2 + 2 * GRAM


def test_op_lists_are_built_when_read_and_do_not_keep_the_model():
    """The op records, seen-not-counted and folded lists come from the recorded events when a
    report first reads them; the report holds the events, not the model."""
    import gc
    import weakref

    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU())
    report = profile_eager(model, (rt.ones(2, 4),), convention="ptflops")
    alive = weakref.ref(model)
    del model
    gc.collect()
    assert alive() is None
    assert [r.op for r in report.ops] == ["linear", "relu"]
    assert report.seen_not_counted == [] and report.folded == []
    assert report.ops[0].macs == 2 * 4 * 8 + 2 * 8  # ptflops: bias counts
