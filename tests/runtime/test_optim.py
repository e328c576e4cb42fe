"""Optimizers: updates computed by hand from the published formulas, PyTorch step by step on
the same parameters and gradients, parameter groups, zero_grad, state_dict, meta parameters."""

import copy

import numpy as np
import pytest

import flopcount.runtime as rt
from flopcount.runtime import optim

GRADS = [np.array([0.5, -1.0, 2.0]), np.array([-0.25, 0.75, 1.5]), np.array([1.0, 1.0, -3.0])]
START = np.array([1.0, -2.0, 0.5])


def run_steps(make_opt, grads=GRADS, start=START, dtype=rt.float64):
    """Parameter values after each step with the gradients given (set, not computed)."""
    p = rt.nn.Parameter(rt.tensor(start, dtype=dtype))
    opt = make_opt([p])
    history = []
    for g in grads:
        p.grad = rt.tensor(g, dtype=dtype)
        opt.step()
        history.append(p.numpy().copy())
    return history, opt, p


# --- hand-computed updates ----------------------------------------------------------------------

def test_plain_sgd():
    history, _, _ = run_steps(lambda ps: optim.SGD(ps, lr=0.1))
    np.testing.assert_allclose(history[-1], START - 0.1 * sum(GRADS), rtol=1e-12)


def test_sgd_momentum_dampening_weight_decay():
    lr, mu, damp, wd = 0.1, 0.9, 0.2, 0.01
    history, opt, p = run_steps(lambda ps: optim.SGD(ps, lr=lr, momentum=mu, dampening=damp, weight_decay=wd))
    w, buf = START.copy(), None
    for g, got in zip(GRADS, history):
        d = g + wd * w
        buf = d.copy() if buf is None else mu * buf + (1 - damp) * d  # no dampening on the first step
        w = w - lr * buf
        np.testing.assert_allclose(got, w, rtol=1e-12)
    np.testing.assert_allclose(opt.state[p]["momentum_buffer"].numpy(), buf, rtol=1e-12)


def test_sgd_nesterov_by_hand():
    # step 1: b = g1, p -= lr·(g1 + mu·g1); step 2: b = mu·g1 + g2, p -= lr·(g2 + mu·b)
    history, _, _ = run_steps(lambda ps: optim.SGD(ps, lr=0.5, momentum=0.5, nesterov=True), grads=GRADS[:2])
    g1, g2 = GRADS[0], GRADS[1]
    p1 = START - 0.5 * (g1 + 0.5 * g1)
    p2 = p1 - 0.5 * (g2 + 0.5 * (0.5 * g1 + g2))
    np.testing.assert_allclose(history[0], p1, rtol=1e-12)
    np.testing.assert_allclose(history[1], p2, rtol=1e-12)


def test_sgd_maximize_climbs():
    history, _, _ = run_steps(lambda ps: optim.SGD(ps, lr=0.1, maximize=True), grads=GRADS[:1])
    np.testing.assert_allclose(history[0], START + 0.1 * GRADS[0], rtol=1e-12)


def adam_reference(grads, lr, beta1, beta2, eps, weight_decay=0.0, amsgrad=False, decoupled=False):
    """Kingma & Ba's Algorithm 1 with bias corrections (and AMSGrad / AdamW variants)."""
    w, m, v, vmax, out = START.copy(), 0.0, 0.0, 0.0, []
    for t, g in enumerate(grads, start=1):
        if decoupled:
            w = w * (1 - lr * weight_decay)
        elif weight_decay:
            g = g + weight_decay * w
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        vmax = np.maximum(vmax, v)
        m_hat = m / (1 - beta1 ** t)
        v_hat = (vmax if amsgrad else v) / (1 - beta2 ** t)
        w = w - lr * m_hat / (np.sqrt(v_hat) + eps)
        out.append(w)
    return out


@pytest.mark.parametrize("amsgrad", [False, True])
@pytest.mark.parametrize("weight_decay", [0.0, 0.1])
def test_adam_by_hand(amsgrad, weight_decay):
    # eps is added to sqrt(v)/sqrt(1 − β2ᵗ) in PyTorch, i.e. to sqrt(v̂): the same as the paper
    history, opt, p = run_steps(lambda ps: optim.Adam(ps, lr=0.01, betas=(0.8, 0.9), eps=1e-3,
                                                      weight_decay=weight_decay, amsgrad=amsgrad))
    ref = adam_reference(GRADS, 0.01, 0.8, 0.9, 1e-3, weight_decay, amsgrad)
    for got, want in zip(history, ref):
        np.testing.assert_allclose(got, want, rtol=1e-12)
    assert opt.state[p]["step"] == 3
    assert ("max_exp_avg_sq" in opt.state[p]) == amsgrad


def test_adam_first_step_moves_each_weight_by_about_lr():
    history, _, _ = run_steps(lambda ps: optim.Adam(ps, lr=0.05), grads=GRADS[:1])
    np.testing.assert_allclose(history[0], START - 0.05 * np.sign(GRADS[0]), rtol=1e-6)


def test_adamw_decouples_weight_decay():
    history, _, _ = run_steps(lambda ps: optim.AdamW(ps, lr=0.01, weight_decay=0.5))
    ref = adam_reference(GRADS, 0.01, 0.9, 0.999, 1e-8, 0.5, decoupled=True)
    np.testing.assert_allclose(history[-1], ref[-1], rtol=1e-12)
    coupled = adam_reference(GRADS, 0.01, 0.9, 0.999, 1e-8, 0.5)
    assert not np.allclose(ref[-1], coupled[-1])
    assert optim.AdamW([rt.nn.Parameter(rt.zeros(1))]).defaults["weight_decay"] == 0.01


# --- the Optimizer base ---------------------------------------------------------------------

def test_param_groups_override_defaults_and_skip_params_without_grad():
    a, b, c = (rt.nn.Parameter(rt.ones(2)) for _ in range(3))
    opt = optim.SGD([{"params": [a]}, {"params": [b, c], "lr": 1.0}], lr=0.1, momentum=0.0)
    assert [g["lr"] for g in opt.param_groups] == [0.1, 1.0]
    assert opt.param_groups[1]["momentum"] == 0.0
    a.grad, b.grad = rt.ones(2), rt.ones(2)
    opt.step()
    np.testing.assert_allclose(a.numpy(), [0.9, 0.9])
    np.testing.assert_allclose(b.numpy(), [0.0, 0.0])
    np.testing.assert_allclose(c.numpy(), [1.0, 1.0])  # no gradient: untouched


def test_constructor_errors():
    p = rt.nn.Parameter(rt.ones(2))
    with pytest.raises(TypeError, match="iterable of Tensors"):
        optim.SGD(p)
    with pytest.raises(ValueError, match="empty parameter list"):
        optim.Adam([])
    with pytest.raises(ValueError, match="more than one parameter group"):
        optim.SGD([{"params": [p]}, {"params": [p]}])
    with pytest.raises(ValueError, match="Invalid learning rate"):
        optim.Adam([p], lr=-1)
    with pytest.raises(ValueError, match="Nesterov"):
        optim.SGD([p], nesterov=True)
    with pytest.raises(ValueError, match="non-leaf"):
        optim.SGD([p * 2])
    with pytest.raises(ValueError, match="beta parameter at index 1"):
        optim.Adam([p], betas=(0.9, 1.0))


def test_zero_grad():
    p = rt.nn.Parameter(rt.ones(3))
    q = rt.nn.Parameter(rt.ones(3))
    opt = optim.SGD([p, q])
    (p + q).sum().backward()  # add's gradient reaches p and q as the same tensor
    opt.zero_grad(set_to_none=False)
    np.testing.assert_array_equal(p.grad.numpy(), np.zeros(3))
    (p * 2).sum().backward()
    np.testing.assert_array_equal(p.grad.numpy(), np.full(3, 2.0))
    np.testing.assert_array_equal(q.grad.numpy(), np.zeros(3))
    opt.zero_grad()
    assert p.grad is None and q.grad is None


def test_closure_is_called_with_grad_enabled():
    p = rt.nn.Parameter(rt.tensor([3.0]))
    opt = optim.SGD([p], lr=0.25)

    def closure():
        opt.zero_grad()
        loss = (p * p).sum()
        loss.backward()
        return loss

    with rt.no_grad():
        loss = opt.step(closure)
    assert loss.item() == 9.0
    assert p.item() == pytest.approx(3.0 - 0.25 * 6.0)


def test_gradient_that_is_a_broadcast_view_with_momentum():
    p = rt.nn.Parameter(rt.ones(2, 3))
    opt = optim.SGD([p], lr=0.1, momentum=0.9)
    p.sum().backward()  # sum's gradient is an expanded (read-only) view of a scalar
    opt.step()
    p.grad = None
    p.sum().backward()
    opt.step()
    np.testing.assert_allclose(p.numpy(), 1 - 0.1 * 1 - 0.1 * 1.9, rtol=1e-6)


def test_meta_parameters_are_a_no_op():
    with rt.meta():
        layer = rt.nn.Linear(4096, 4096)
    opt = optim.AdamW(layer.parameters(), lr=1e-3)
    layer(rt.randn(2, 4096, device="meta")).sum().backward()
    assert layer.weight.grad.device.type == "meta"
    opt.step()
    opt.zero_grad()
    assert layer.weight.data is None and not opt.state


@pytest.mark.parametrize("make_opt", [
    lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=0.01),
    lambda ps: optim.Adam(ps, lr=0.01, amsgrad=True),
    lambda ps: optim.AdamW(ps, lr=0.01),
], ids=["sgd", "adam", "adamw"])
def test_state_dict_round_trip_continues_identically(make_opt):
    _, opt, p = run_steps(make_opt, grads=GRADS[:2])
    saved = opt.state_dict()
    assert saved["param_groups"][0]["params"] == [0]
    assert set(saved["state"]) == {0}
    q = rt.nn.Parameter(rt.tensor(p.numpy(), dtype=rt.float64))
    fresh = make_opt([q])
    fresh.param_groups[0]["lr"] = 123.0  # overwritten by the load
    fresh.load_state_dict(copy.deepcopy(saved))
    assert fresh.param_groups[0]["lr"] == opt.param_groups[0]["lr"]
    for opt_, param in ((opt, p), (fresh, q)):
        param.grad = rt.tensor(GRADS[2])
        opt_.step()
    np.testing.assert_allclose(q.numpy(), p.numpy(), rtol=1e-15)
    with pytest.raises(ValueError, match="doesn't match the size"):
        make_opt([q, rt.nn.Parameter(rt.ones(1))]).load_state_dict(saved)


def test_named_parameters_are_accepted():
    layer = rt.nn.Linear(2, 3)
    opt = optim.SGD(layer.named_parameters(), lr=0.1)
    assert opt.param_groups[0]["param_names"] == ["weight", "bias"]
    assert opt.param_groups[0]["params"][0] is layer.weight


# --- PyTorch, step by step ---------------------------------------------------------------------

CONFIGS = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.05, momentum=0.9)),
    ("SGD", dict(lr=0.05, momentum=0.9, dampening=0.3, weight_decay=0.01)),
    ("SGD", dict(lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.1)),
    ("SGD", dict(lr=0.05, momentum=0.5, maximize=True)),
    ("Adam", dict(lr=0.01)),
    ("Adam", dict(lr=0.01, betas=(0.8, 0.95), eps=1e-6, weight_decay=0.05)),
    ("Adam", dict(lr=0.02, amsgrad=True)),
    ("Adam", dict(lr=0.02, amsgrad=True, weight_decay=0.1, maximize=True)),
    ("AdamW", dict(lr=0.01)),
    ("AdamW", dict(lr=0.01, weight_decay=0.3, amsgrad=True)),
]


@pytest.mark.parametrize("name,kwargs", CONFIGS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CONFIGS)])
def test_matches_torch_step_by_step(name, kwargs):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    shapes = [(4, 3), (3,)]
    starts = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    ours = [rt.nn.Parameter(rt.tensor(a)) for a in starts]
    theirs = [torch.nn.Parameter(torch.tensor(a)) for a in starts]
    groups = lambda ps: [{"params": [ps[0]]}, {"params": [ps[1]], "lr": kwargs["lr"] * 0.5}]
    opt_ours = getattr(optim, name)(groups(ours), **kwargs)
    opt_theirs = getattr(torch.optim, name)(groups(theirs), **kwargs)
    for _ in range(6):
        grads = [rng.standard_normal(s).astype(np.float32) for s in shapes]
        for p, g in zip(ours, grads):
            p.grad = rt.tensor(g)
        for p, g in zip(theirs, grads):
            p.grad = torch.tensor(g)
        opt_ours.step()
        opt_theirs.step()
        for o, t in zip(ours, theirs):
            np.testing.assert_allclose(o.numpy(), t.detach().numpy(), rtol=1e-5, atol=1e-6)
    for o, t in zip(ours, theirs):
        ours_state, their_state = opt_ours.state[o], opt_theirs.state[t]
        assert set(ours_state) == set(their_state)
        for key, value in their_state.items():
            np.testing.assert_allclose(np.asarray(ours_state[key] if key == "step" else ours_state[key].numpy()),
                                       value.numpy(), rtol=1e-5, atol=1e-7, err_msg=key)


def test_loads_a_torch_state_dict_converted_to_numpy():
    torch = pytest.importorskip("torch")
    start = np.arange(6, dtype=np.float32).reshape(2, 3)
    tp = torch.nn.Parameter(torch.tensor(start))
    topt = torch.optim.Adam([tp], lr=0.1, amsgrad=True)
    for k in range(3):
        tp.grad = torch.full((2, 3), float(k + 1))
        topt.step()
    saved = topt.state_dict()
    converted = {"param_groups": saved["param_groups"],
                 "state": {i: {k: v.numpy() for k, v in s.items()} for i, s in saved["state"].items()}}
    p = rt.nn.Parameter(rt.tensor(tp.detach().numpy()))
    opt = optim.Adam([p])
    opt.load_state_dict(converted)
    assert opt.param_groups[0]["lr"] == 0.1 and opt.param_groups[0]["amsgrad"] is True
    tp.grad = torch.full((2, 3), -2.0)
    topt.step()
    p.grad = rt.full((2, 3), -2.0)
    opt.step()
    np.testing.assert_allclose(p.numpy(), tp.detach().numpy(), rtol=1e-6)


def test_docstring_examples():
    import doctest

    from flopcount.runtime.optim import adam, optimizer, sgd

    for module in (optimizer, sgd, adam):
        result = doctest.testmod(module)
        assert result.attempted > 0 and result.failed == 0, module.__name__
