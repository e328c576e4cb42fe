"""Module: registration, traversal, state dicts, hooks, modes, devices and dtypes."""

from collections import OrderedDict

import numpy as np
import pytest

import flopcount.runtime as rt
from flopcount.runtime import nn
from opcheck import Recorder


class Block(nn.Module):
    def __init__(self, shared=None):
        super().__init__()
        self.fc = nn.Linear(3, 4)
        self.shared = shared if shared is not None else nn.Linear(4, 4, bias=False)
        self.register_buffer("count", rt.zeros(1))
        self.register_buffer("scratch", rt.zeros(2), persistent=False)

    def forward(self, x):
        return self.shared(self.fc(x)).relu()


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        shared = nn.Linear(4, 4, bias=False)
        self.a = Block(shared)
        self.b = Block(shared)
        self.head = nn.Linear(4, 2)

    def forward(self, x):
        return self.head(self.b(self.a(x)[..., :3]))


# --- registration --------------------------------------------------------------------------

def test_setattr_registers_parameters_modules_and_buffers():
    m = nn.Module()
    m.w = nn.Parameter(rt.ones(2))
    m.child = nn.Linear(2, 2)
    m.plain = rt.ones(2)  # a plain tensor attribute is neither parameter nor buffer
    m.register_buffer("stat", rt.zeros(3))
    m.buf = nn.Buffer(rt.ones(1), persistent=False)
    assert list(m._parameters) == ["w"]
    assert list(m._modules) == ["child"]
    assert list(m._buffers) == ["stat", "buf"]
    assert "plain" not in m._parameters and "plain" not in m._buffers
    assert list(m.state_dict()) == ["w", "stat", "child.weight", "child.bias"]  # buf not persistent
    m.w = None
    assert m.w is None and [n for n, _ in m.named_parameters()] == ["child.weight", "child.bias"]
    with pytest.raises(TypeError, match="cannot assign Tensor as parameter 'w'"):
        m.w = rt.ones(2)
    m.child = nn.Identity()  # a module replaces a module
    assert isinstance(m.child, nn.Identity)
    del m.child
    assert "child" not in m._modules
    with pytest.raises(AttributeError, match="has no attribute 'child'"):
        m.child


def test_assigning_before_init_is_an_error():
    class Bad(nn.Module):
        def __init__(self):
            self.fc = nn.Linear(1, 1)

    with pytest.raises(AttributeError, match="before Module.__init__"):
        Bad()


def test_named_modules_have_dotted_paths_and_shared_modules_appear_once():
    net = Net()
    names = [n for n, _ in net.named_modules()]
    assert names == ["", "a", "a.fc", "a.shared", "b", "b.fc", "head"]
    all_names = [n for n, _ in net.named_modules(remove_duplicate=False)]
    assert "b.shared" in all_names and len(all_names) == 8
    assert net.get_submodule("b.fc") is net.b.fc
    assert net.get_submodule("a.shared") is net.get_submodule("b.shared")


def test_shared_parameters_are_counted_once():
    net = Net()
    params = list(net.named_parameters())
    assert [n for n, _ in params] == ["a.fc.weight", "a.fc.bias", "a.shared.weight", "b.fc.weight",
                                      "b.fc.bias", "head.weight", "head.bias"]
    assert sum(p.numel() for _, p in params) == 2 * (12 + 4) + 16 + 8 + 2
    # the state dict keeps every name, as PyTorch's does
    assert "b.shared.weight" in net.state_dict()


# --- state dicts -----------------------------------------------------------------------------

def test_state_dict_round_trip_with_numpy_and_tensors():
    src, dst = Net(), Net()
    sd = src.state_dict()
    assert all(not t.requires_grad for t in sd.values())
    dst.load_state_dict({k: v.numpy() for k, v in sd.items()})
    for (k, a), b in zip(dst.state_dict().items(), sd.values()):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=k)
    x = rt.randn(2, 3)
    np.testing.assert_array_equal(dst(x).numpy(), src(x).numpy())
    other = Net()
    result = other.load_state_dict(sd)  # tensors
    assert result.missing_keys == [] and result.unexpected_keys == []
    np.testing.assert_array_equal(other.head.weight.numpy(), src.head.weight.numpy())
    # loading copies: the source is not aliased
    with rt.no_grad():
        src.head.weight.fill_(7.0)
    assert not np.any(other.head.weight.numpy() == 7.0)


def test_load_state_dict_strict_errors_list_every_problem():
    net = Net()
    sd = OrderedDict((k, v.numpy()) for k, v in net.state_dict().items())
    del sd["head.bias"]
    del sd["a.count"]
    sd["extra.weight"] = np.zeros(1)
    sd["head.weight"] = np.zeros((3, 4), dtype=np.float32)
    with pytest.raises(rt.ShapeError) as info:
        net.load_state_dict(sd)
    msg = str(info.value)
    assert "missing keys: ['a.count', 'head.bias']" in msg
    assert "unexpected keys: ['extra.weight']" in msg
    assert "size mismatch for head.weight: expected (2, 4), got (3, 4)" in msg
    sd["head.weight"] = np.ones((2, 4))  # float64 is cast to the parameter's float32
    result = net.load_state_dict(sd, strict=False)
    assert result.missing_keys == ["a.count", "head.bias"] and result.unexpected_keys == ["extra.weight"]
    assert net.head.weight.dtype is rt.float32 and net.head.weight.numpy().sum() == 8.0


# --- hooks -------------------------------------------------------------------------------------

def test_hooks_fire_in_order_global_first_and_can_replace_args_and_output():
    fc = nn.Linear(2, 2)
    log = []
    handles = [
        nn.register_module_forward_pre_hook(lambda m, args: log.append("global pre")),
        fc.register_forward_pre_hook(lambda m, args: log.append("pre 1")),
        fc.register_forward_pre_hook(lambda m, args: (args[0] * 0,)),  # replaces the input
        fc.register_forward_pre_hook(lambda m, args: log.append(("pre 3 sees", float(args[0].sum())))),
        nn.register_module_forward_hook(lambda m, args, out: log.append("global post")),
        fc.register_forward_hook(lambda m, args, out: log.append("post 1")),
        fc.register_forward_hook(lambda m, args, out: out + 100),  # replaces the output
        fc.register_forward_hook(lambda m, args, out: log.append(("post 3 sees", float(out.min()) >= 99))),
    ]
    out = fc(rt.ones(1, 2))
    assert log == ["global pre", "pre 1", ("pre 3 sees", 0.0), "global post", "post 1", ("post 3 sees", True)]
    np.testing.assert_allclose(out.numpy(), fc.bias.numpy()[None] + 100, rtol=1e-6)
    for h in handles:
        h.remove()
    log.clear()
    x = rt.ones(1, 2)
    np.testing.assert_allclose(fc(x).numpy(), rt.linear(x, fc.weight, fc.bias).numpy())
    assert log == []
    assert not fc._forward_pre_hooks and not fc._forward_hooks
    assert not nn.modules.module._global_forward_pre_hooks and not nn.modules.module._global_forward_hooks


def test_hook_handle_as_context_manager():
    fc = nn.Linear(2, 2)
    seen = []
    with fc.register_forward_hook(lambda m, a, o: seen.append(m)):
        fc(rt.ones(1, 2))
    fc(rt.ones(1, 2))
    assert seen == [fc]


class _CallLog:
    """A module-call observer that logs what it is given and what forward returned."""

    def __init__(self):
        self.log = []

    def record_call(self, module, args, kwargs):
        self.log.append(("enter", type(module).__name__, float(args[0].sum())))
        out = module.forward(*args, **kwargs)
        self.log.append(("exit", type(module).__name__, float(out.sum())))
        return out


def test_call_observer_sees_every_call_nested_with_args_after_pre_hooks_and_output_before_hooks():
    net = nn.Sequential(nn.Linear(2, 2), nn.ReLU())
    net[0].register_forward_pre_hook(lambda m, args: (args[0] * 2,))
    net[0].register_forward_hook(lambda m, args, out: out + 100)
    observer = _CallLog()
    x = rt.ones(1, 2)
    with nn.observe_module_calls(observer):
        out = net(x)
    raw = rt.linear(x * 2, net[0].weight, net[0].bias)
    names = [(kind, name) for kind, name, _ in observer.log]
    assert names == [("enter", "Sequential"), ("enter", "Linear"), ("exit", "Linear"),
                     ("enter", "ReLU"), ("exit", "ReLU"), ("exit", "Sequential")]
    assert observer.log[1][2] == pytest.approx(4.0)                     # after the pre-hook
    assert observer.log[2][2] == pytest.approx(float(raw.sum()), rel=1e-6)  # before the forward hook
    np.testing.assert_allclose(out.numpy(), (raw + 100).relu().numpy(), rtol=1e-6)
    observer.log.clear()
    net(x)
    assert observer.log == []  # let go after the block


def test_call_observer_is_one_at_a_time_and_let_go_when_forward_raises():
    class Broken(nn.Module):
        def forward(self, x):
            raise ValueError("broken forward")

    observer = _CallLog()
    with pytest.raises(ValueError, match="broken forward"):
        with nn.observe_module_calls(observer):
            with pytest.raises(RuntimeError, match="another observer"):
                with nn.observe_module_calls(_CallLog()):
                    pass
            Broken()(rt.ones(1))
    assert observer.log == [("enter", "Broken", 1.0)]
    assert rt.dispatch.state.call_observer is None
    assert rt.dispatch.state.scope_stack == []


def test_observers_see_the_innermost_module_on_the_fast_path_too():
    net = Net()
    rec = Recorder()
    with rt.observe(rec):
        net(rt.randn(2, 3))
    by_op = [(e.op.name, e.module) for e in rec.events]
    linears = [m for name, m in by_op if name == "linear"]
    assert linears == [net.a.fc, net.a.shared, net.b.fc, net.b.shared, net.head]
    relus = [m for name, m in by_op if name == "relu"]
    assert relus == [net.a, net.b]  # functional ops inside a forward belong to that module
    getitems = [m for name, m in by_op if name == "getitem"]
    assert getitems == [net]
    assert rt.dispatch.state.scope_stack == []


def test_scope_is_popped_when_forward_raises():
    fc = nn.Linear(2, 2)
    with pytest.raises(rt.ShapeError):
        fc(rt.ones(1, 3))
    assert rt.dispatch.state.scope_stack == []


# --- modes, apply, devices and dtypes -------------------------------------------------------

def test_train_eval_flags_reach_every_submodule():
    net = Net()
    assert all(m.training for m in net.modules())
    assert net.eval() is net
    assert not any(m.training for m in net.modules())
    net.a.train()
    assert net.a.training and net.a.fc.training and not net.b.training and not net.training


def test_apply_visits_children_before_parents():
    net = Net()
    order = []
    assert net.apply(lambda m: order.append(m)) is net
    # as in PyTorch, a module shared by two parents is visited under each of them
    assert order == [net.a.fc, net.a.shared, net.a, net.b.fc, net.b.shared, net.b, net.head, net]

    def zero(m):
        if isinstance(m, nn.Linear):
            nn.init.zeros_(m.weight)

    net.apply(zero)
    assert all(float(abs(p).sum()) == 0 for n, p in net.named_parameters() if n.endswith("weight"))


def test_to_dtype_converts_floats_in_place_and_keeps_identity():
    m = nn.Module()
    m.fc = nn.Linear(2, 3)
    m.register_buffer("steps", rt.tensor([3]))
    weight = m.fc.weight
    before = weight.numpy().copy()
    assert m.to(rt.float64) is m
    assert m.fc.weight is weight and weight.dtype is rt.float64 and weight.requires_grad
    np.testing.assert_array_equal(weight.numpy(), before.astype(np.float64))
    assert m.steps.dtype is rt.int64  # integer buffers keep their dtype
    out = m.fc(rt.ones(1, 2, dtype=rt.float64))
    assert out.dtype is rt.float64
    m.half()
    assert weight.dtype is rt.float16


def test_to_meta_then_to_empty():
    net = Net()
    net.to("meta")
    assert all(p.device.type == "meta" and p.data is None for p in net.parameters())
    assert all(p.requires_grad for p in net.parameters())
    out = net(rt.randn(5, 3, device="meta"))
    assert out.shape == (5, 2) and out.device.type == "meta"
    net.to_empty(device="cpu")
    assert all(p.device.type == "cpu" and p.numpy().shape == p.shape for p in net.parameters())
    net.load_state_dict(Net().state_dict())
    assert net(rt.randn(5, 3)).shape == (5, 2)


def test_modules_built_under_meta_hold_no_data():
    with rt.meta():
        fc = nn.Linear(1000, 1000)
    assert fc.weight.device.type == "meta" and fc.weight.data is None
    assert rt.zeros(1).device.type == "cpu"  # the default device is restored


def test_zero_grad_and_requires_grad():
    net = Net()
    net(rt.randn(2, 3)).sum().backward()
    assert net.head.weight.grad is not None
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())
    net.requires_grad_(False)
    assert not any(p.requires_grad for p in net.parameters())
    out = net(rt.randn(2, 3))
    assert not out.requires_grad


def test_repr_nests_children():
    net = Net()
    text = repr(net)
    assert text.splitlines()[0] == "Net("
    assert "(head): Linear(in_features=4, out_features=2, bias=True)" in text
    assert "  (a): Block(\n    (fc): Linear(in_features=3, out_features=4, bias=True)" in text
