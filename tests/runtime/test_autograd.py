"""Autograd: accumulation, un-broadcasting, grad modes, retain_graph, deep chains, and a small
MLP's gradients against finite differences."""

import numpy as np
import pytest

import flopcount.runtime as rt
from opcheck import check_grad, record


def test_gradients_accumulate_over_uses_and_over_backward_calls():
    x = rt.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = (x * x + 3 * x).sum()  # dy/dx = 2x + 3, x reached along two paths
    y.backward()
    assert x.grad.tolist() == [5.0, 7.0, 9.0]
    (x * 2).sum().backward()  # a second graph adds into .grad
    assert x.grad.tolist() == [7.0, 9.0, 11.0]


def test_unbroadcast_sums_gradients_back_to_input_shapes():
    a = rt.ones(3, 1, requires_grad=True)
    b = rt.ones(4, requires_grad=True)
    c = rt.tensor(2.0, requires_grad=True)
    ((a + b) * c).sum().backward()
    assert a.grad.shape == (3, 1) and a.grad.tolist() == [[8.0]] * 3
    assert b.grad.shape == (4,) and b.grad.tolist() == [6.0] * 4
    assert c.grad.shape == () and c.grad.item() == 24.0


def test_grad_flows_only_where_required():
    a = rt.ones(2, requires_grad=True)
    b = rt.ones(2)
    (a * b).sum().backward()
    assert a.grad is not None and b.grad is None
    assert not (b * 2).requires_grad
    assert (a * 2).grad_fn is not None and a.grad_fn is None and a.is_leaf


def test_integer_outputs_do_not_require_grad():
    a = rt.tensor([1.5, -2.0], requires_grad=True)
    assert not (a > 0).requires_grad
    assert not a.argmax().requires_grad


def test_no_grad_enable_grad_and_set_grad_enabled():
    x = rt.ones(2, requires_grad=True)
    with rt.no_grad():
        assert not rt.is_grad_enabled()
        y = x * 2
        with rt.enable_grad():
            z = x * 2
        assert not rt.is_grad_enabled()
    assert rt.is_grad_enabled()
    assert not y.requires_grad and y.grad_fn is None
    assert z.requires_grad

    @rt.no_grad()
    def f(t):
        return t * 3

    assert not f(x).requires_grad
    rt.set_grad_enabled(False)
    try:
        assert not (x * 2).requires_grad
    finally:
        rt.set_grad_enabled(True)
    with rt.set_grad_enabled(False):
        assert not (x * 2).requires_grad
    assert rt.is_grad_enabled() and (x * 2).requires_grad


def test_no_grad_is_restored_after_an_exception():
    with pytest.raises(ValueError):
        with rt.no_grad():
            raise ValueError("boom")
    assert rt.is_grad_enabled()


def test_retain_graph_allows_a_second_backward_and_its_absence_does_not():
    x = rt.tensor([1.0, -1.0], requires_grad=True)
    y = (x * x * x).sum()
    y.backward(retain_graph=True)
    assert x.grad.tolist() == [3.0, 3.0]
    y.backward()
    assert x.grad.tolist() == [6.0, 6.0]
    with pytest.raises(RuntimeError, match="second time"):
        y.backward()


def test_backward_errors():
    with pytest.raises(RuntimeError, match="does not require grad"):
        rt.ones(2).sum().backward()
    with pytest.raises(RuntimeError, match="only for scalar outputs"):
        (rt.ones(2, requires_grad=True) * 2).backward()


def test_backward_with_an_explicit_gradient():
    x = rt.tensor([1.0, 2.0], requires_grad=True)
    (x * x).backward(rt.tensor([1.0, 10.0]))
    assert x.grad.tolist() == [2.0, 40.0]


def test_deep_chain_has_no_recursion_limit():
    x = rt.tensor([1.0], dtype=rt.float64, requires_grad=True)
    y = x
    for _ in range(10_000):
        y = y * 1.0001
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [1.0001 ** 10_000], rtol=1e-9)
    del y  # tearing down a 10k-node graph must not overflow the stack either


def test_backward_ops_are_dispatched_with_phase_and_module():
    fc = rt.nn.Linear(3, 2)
    x = rt.randn(4, 3)
    _, events = record(lambda: fc(x).sum().backward())
    backward = [e for e in events if e.phase == "backward"]
    assert {e.op.name for e in backward} >= {"matmul", "sum"}
    assert all(e.module is fc for e in backward if e.op.name == "matmul")
    assert sum(e.cost.macs for e in backward) == 4 * 3 * 2  # only the weight gradient (x needs none)


def test_create_graph_gives_second_derivatives():
    x = rt.tensor([2.0], dtype=rt.float64, requires_grad=True)
    y = (x * x * x).sum()
    y.backward(create_graph=True)
    g = x.grad
    assert g.item() == 12.0 and g.requires_grad
    x.grad = None
    g.sum().backward()
    assert x.grad.item() == 12.0  # d²(x³)/dx² = 6x


def test_small_mlp_gradients_match_finite_differences():
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal((5, 4)), rng.standard_normal((6, 4)), rng.standard_normal(6),
              rng.standard_normal((3, 6)), rng.standard_normal(3), rng.integers(0, 3, 5)]

    def mlp(x, w1, b1, w2, b2, labels):
        h = rt.tanh(rt.linear(x, w1, b1))
        h = rt.relu(h) + 0.1 * h  # a kink, away from zero for these inputs
        logits = rt.linear(h, w2, b2)
        logp = rt.log_softmax(logits, -1)
        picked = rt.gather(logp, 1, labels.reshape(-1, 1))
        return -picked.mean()

    check_grad(mlp, arrays, wrt=[0, 1, 2, 3, 4], rtol=1e-5, atol=1e-8)


def test_mlp_gradients_match_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    x = rng.standard_normal((8, 5)).astype(np.float32)
    ours = rt.nn.Sequential(rt.nn.Linear(5, 7), _Tanh(), rt.nn.Linear(7, 2))
    theirs = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.Tanh(), torch.nn.Linear(7, 2))
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    (ours(rt.tensor(x)) ** 2).mean().backward()
    (theirs(torch.tensor(x)) ** 2).mean().backward()
    for name, p in ours.named_parameters():
        t = dict(theirs.named_parameters())[name]
        np.testing.assert_allclose(p.grad.numpy(), t.grad.numpy(), rtol=1e-5, atol=1e-7, err_msg=name)


class _Tanh(rt.nn.Module):
    def forward(self, x):
        return rt.tanh(x)
