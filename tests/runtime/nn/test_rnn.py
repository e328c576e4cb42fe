"""RNN, LSTM, GRU and their cells: numpy references, finite differences, the MAC formula of
COUNTING.md, and PyTorch on the same weights (forward and backward, every option)."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import flopcount.runtime as rt
from flopcount.runtime import nn
from opcheck import record

MODES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


def make(mode, *args, **kwargs):
    if mode.startswith("RNN"):
        kwargs["nonlinearity"] = "tanh" if mode == "RNN_TANH" else "relu"
        return nn.RNN(*args, **kwargs)
    return getattr(nn, mode)(*args, **kwargs)


# --- a numpy reference written from the textbook equations -----------------------------------

def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def np_step(mode, x, state, w_ih, w_hh, b_ih, b_hh):
    gi = x @ w_ih.T + b_ih
    gh = state[0] @ w_hh.T + b_hh
    if mode == "RNN_TANH":
        return (np.tanh(gi + gh),)
    if mode == "RNN_RELU":
        return (np.maximum(gi + gh, 0),)
    if mode == "LSTM":
        i, f, g, o = np.split(gi + gh, 4, axis=-1)
        c = _sigmoid(f) * state[1] + _sigmoid(i) * np.tanh(g)
        return _sigmoid(o) * np.tanh(c), c
    r_i, z_i, n_i = np.split(gi, 3, axis=-1)
    r_h, z_h, n_h = np.split(gh, 3, axis=-1)
    r, z = _sigmoid(r_i + r_h), _sigmoid(z_i + z_h)
    n = np.tanh(n_i + r * n_h)
    return ((1 - z) * n + z * state[0],)


def np_rnn(mode, weights, x, states, num_layers, bidirectional):
    """x (T, N, in) time-major; states: list of (L·D, N, h). Returns output and final states."""
    dirs = 2 if bidirectional else 1
    finals = [[] for _ in states]
    for layer in range(num_layers):
        outs = []
        for d in range(dirs):
            sfx = f"_l{layer}" + ("_reverse" if d else "")
            w = [weights.get(n + sfx) for n in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]
            w = [v if v is not None else 0.0 for v in w]
            state = tuple(s[layer * dirs + d] for s in states)
            ys = [None] * x.shape[0]
            for t in (range(x.shape[0]) if d == 0 else reversed(range(x.shape[0]))):
                state = np_step(mode, x[t], state, *w)
                ys[t] = state[0]
            outs.append(np.stack(ys))
            for f, s in zip(finals, state):
                f.append(s)
        x = np.concatenate(outs, axis=-1)
    return x, [np.stack(f) for f in finals]


def _weights(module):
    return {k: v.numpy() for k, v in module.state_dict().items()}


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("num_layers,bidirectional,bias", [(1, False, True), (2, True, True), (2, False, False)])
def test_forward_matches_numpy_reference(mode, num_layers, bidirectional, bias):
    m = make(mode, 3, 4, num_layers=num_layers, bidirectional=bidirectional, bias=bias).double()
    x = np.random.default_rng(0).standard_normal((5, 2, 3))
    dirs = 2 if bidirectional else 1
    count = 2 if mode == "LSTM" else 1
    h0 = [np.random.default_rng(i + 1).standard_normal((num_layers * dirs, 2, 4)) for i in range(count)]
    hx = tuple(rt.tensor(h) for h in h0)
    out, hn = m(rt.tensor(x), hx if mode == "LSTM" else hx[0])
    ref_out, ref_hn = np_rnn(mode, _weights(m), x, h0, num_layers, bidirectional)
    np.testing.assert_allclose(out.numpy(), ref_out, rtol=1e-10, atol=1e-12)
    got = list(hn) if mode == "LSTM" else [hn]
    for g, r in zip(got, ref_hn):
        np.testing.assert_allclose(g.numpy(), r, rtol=1e-10, atol=1e-12)


@settings(max_examples=12, deadline=None)
@given(mode=st.sampled_from(sorted(MODES)), steps=st.integers(1, 4), batch=st.integers(1, 3),
       size_in=st.integers(1, 4), hidden=st.integers(1, 4), layers=st.integers(1, 2), bidirectional=st.booleans())
def test_random_shapes_match_numpy_reference(mode, steps, batch, size_in, hidden, layers, bidirectional):
    m = make(mode, size_in, hidden, num_layers=layers, bidirectional=bidirectional).double()
    x = np.random.default_rng(steps).standard_normal((steps, batch, size_in))
    out, hn = m(rt.tensor(x))
    dirs = 2 if bidirectional else 1
    zeros = [np.zeros((layers * dirs, batch, hidden))] * (2 if mode == "LSTM" else 1)
    ref_out, ref_hn = np_rnn(mode, _weights(m), x, zeros, layers, bidirectional)
    np.testing.assert_allclose(out.numpy(), ref_out, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose((hn[0] if mode == "LSTM" else hn).numpy(), ref_hn[0], rtol=1e-10, atol=1e-12)


def test_gru_uses_pytorchs_reset_gate_placement():
    # With W_hn = 0 and b_hn != 0, PyTorch's r·(W_hn h + b_hn) differs from W_hn (r·h) + b_hn.
    cell = nn.GRUCell(1, 1).double()
    with rt.no_grad():
        cell.weight_ih.copy_(rt.tensor([[0.0], [0.0], [0.0]], dtype=rt.float64))
        cell.weight_hh.copy_(rt.tensor([[0.0], [0.0], [0.0]], dtype=rt.float64))
        cell.bias_ih.copy_(rt.tensor([0.0, 0.0, 0.0], dtype=rt.float64))
        cell.bias_hh.copy_(rt.tensor([0.0, -100.0, 1.0], dtype=rt.float64))  # r = 0.5, z ~ 0
    h = cell(rt.zeros(1, 1, dtype=rt.float64))
    # r = sigmoid(0) = 1/2, n = tanh(0 + r·1) = tanh(0.5), h' = (1 - z)·n ~ tanh(0.5)
    np.testing.assert_allclose(h.item(), np.tanh(0.5), rtol=1e-12)


def test_zero_initial_state_equals_no_state_and_batch_first_equals_transpose():
    m = nn.LSTM(3, 4, batch_first=True)
    x = rt.randn(2, 5, 3)
    out1, (h1, c1) = m(x)
    out2, (h2, c2) = m(x, (rt.zeros(1, 2, 4), rt.zeros(1, 2, 4)))
    np.testing.assert_array_equal(out1.numpy(), out2.numpy())
    m.batch_first = False
    out3, _ = m(x.transpose(0, 1))
    np.testing.assert_allclose(out3.transpose(0, 1).numpy(), out1.numpy(), rtol=1e-6)


@pytest.mark.parametrize("mode", sorted(MODES))
def test_unbatched_input_equals_batch_of_one(mode):
    m = make(mode, 3, 4, num_layers=2, bidirectional=True)
    x = rt.randn(6, 3)
    out, hn = m(x)
    out_b, hn_b = m(x.unsqueeze(1))
    assert out.shape == (6, 8)
    np.testing.assert_allclose(out.numpy(), out_b.numpy()[:, 0], rtol=1e-6)
    first = hn[0] if mode == "LSTM" else hn
    first_b = hn_b[0] if mode == "LSTM" else hn_b
    assert first.shape == (4, 4)
    np.testing.assert_allclose(first.numpy(), first_b.numpy()[:, 0], rtol=1e-6)


# --- gradients by finite differences (float64) ---------------------------------------------------

def _numeric_grad(loss_of, array, eps=1e-6):
    """Central differences of ``loss_of()`` with respect to ``array``, changed in place."""
    grad = np.zeros_like(array)
    flat, gflat = array.reshape(-1), grad.reshape(-1)
    for k in range(flat.size):
        old = flat[k]
        flat[k] = old + eps
        plus = loss_of()
        flat[k] = old - eps
        minus = loss_of()
        flat[k] = old
        gflat[k] = (plus - minus) / (2 * eps)
    return grad


@pytest.mark.parametrize("mode", sorted(MODES))
def test_gradients_match_finite_differences(mode):
    m = make(mode, 2, 3, num_layers=2, bidirectional=True).double()
    rng = np.random.default_rng(0)
    x = rt.tensor(rng.standard_normal((3, 2, 2)), requires_grad=True)
    h0 = rt.tensor(rng.standard_normal((4, 2, 3)), requires_grad=True)
    hx = (h0, rt.tensor(rng.standard_normal((4, 2, 3)))) if mode == "LSTM" else h0
    w_out = rt.tensor(rng.standard_normal((3, 2, 6)))

    def loss():
        out, hn = m(x, hx)
        h_last = hn[0] if mode == "LSTM" else hn
        return (out * w_out).sum() + (h_last * h_last).sum()

    loss().backward()
    with rt.no_grad():
        value = lambda: float(loss().item())
        checks = [(x, x.data), (h0, h0.data)] + [(p, p.data) for p in (m.weight_hh_l0, m.bias_ih_l1_reverse,
                                                                       m.weight_ih_l1)]
        for t, array in checks:
            np.testing.assert_allclose(t.grad.numpy(), _numeric_grad(value, array), rtol=1e-5, atol=1e-7)


# --- the MAC count the dispatcher reports ------------------------------------------------------

@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("num_layers,bidirectional", [(1, False), (3, True)])
def test_macs_equal_the_counting_formula(mode, num_layers, bidirectional):
    n, steps, size_in, hidden = 2, 7, 5, 6
    m = make(mode, size_in, hidden, num_layers=num_layers, bidirectional=bidirectional)
    _, events = record(lambda: m(rt.randn(steps, n, size_in)))
    dirs = 2 if bidirectional else 1
    g = MODES[mode]
    # COUNTING.md: N·(in + h)·G·h per step, layer and direction; deeper layers take D·h inputs
    expected = sum(n * ((size_in if layer == 0 else dirs * hidden) + hidden) * g * hidden * steps * dirs
                   for layer in range(num_layers))
    assert sum(e.cost.macs for e in events) == expected
    assert {e.op.name for e in events if e.cost.macs} == {"linear"}


def test_lstm_macs_on_meta_equal_formula_times_steps_layers_directions():
    n, steps, size_in, hidden, layers = 8, 50, 128, 256, 2
    with rt.meta():
        m = nn.LSTM(size_in, hidden, num_layers=layers, bidirectional=True)
        x = rt.randn(steps, n, size_in)
    (out, (h, c)), events = record(lambda: m(x))
    assert out.shape == (steps, n, 2 * hidden) and out.device.type == "meta"
    assert h.shape == c.shape == (2 * layers, n, hidden)
    per_step = [n * (size_in + hidden) * 4 * hidden, n * (2 * hidden + hidden) * 4 * hidden]
    assert sum(e.cost.macs for e in events) == steps * 2 * sum(per_step)


@pytest.mark.parametrize("cell,g", [(nn.RNNCell, 1), (nn.LSTMCell, 4), (nn.GRUCell, 3)])
def test_cell_macs(cell, g):
    _, events = record(lambda: cell(5, 7)(rt.randn(3, 5)))
    assert sum(e.cost.macs for e in events) == 3 * (5 + 7) * g * 7


# --- cells ------------------------------------------------------------------------------------

@pytest.mark.parametrize("mode,cls", [("RNN_TANH", nn.RNNCell), ("LSTM", nn.LSTMCell), ("GRU", nn.GRUCell)])
@pytest.mark.parametrize("bias", [True, False])
def test_cells_match_numpy_reference(mode, cls, bias):
    cell = cls(3, 4, bias=bias).double()
    rng = np.random.default_rng(0)
    x, h, c = rng.standard_normal((2, 3)), rng.standard_normal((2, 4)), rng.standard_normal((2, 4))
    w = _weights(cell)
    args = (w["weight_ih"], w["weight_hh"], w.get("bias_ih", 0.0), w.get("bias_hh", 0.0))
    state = (h, c) if mode == "LSTM" else (h,)
    ref = np_step(mode, x, state, *args)
    got = cell(rt.tensor(x), tuple(rt.tensor(s) for s in state) if mode == "LSTM" else rt.tensor(h))
    got = got if isinstance(got, tuple) else (got,)
    for g_, r in zip(got, ref):
        np.testing.assert_allclose(g_.numpy(), r, rtol=1e-10)


def test_relu_cell_and_unbatched_cell():
    cell = nn.RNNCell(3, 4, nonlinearity="relu")
    x = rt.randn(3)
    h = cell(x)
    assert h.shape == (4,)
    w = _weights(cell)
    np.testing.assert_allclose(h.numpy(), np.maximum(x.numpy() @ w["weight_ih"].T + w["bias_ih"] + w["bias_hh"], 0),
                               rtol=1e-6)


# --- structure, errors, meta ------------------------------------------------------------------

def test_parameter_names_shapes_and_init_range():
    m = nn.GRU(3, 5, num_layers=2, bidirectional=True)
    shapes = dict((k, v.shape) for k, v in m.named_parameters())
    assert shapes["weight_ih_l0"] == (15, 3)
    assert shapes["weight_ih_l1_reverse"] == (15, 10)
    assert shapes["weight_hh_l1"] == (15, 5)
    assert shapes["bias_hh_l0_reverse"] == (15,)
    assert len(shapes) == 16
    bound = 1 / np.sqrt(5)
    for p in m.parameters():
        assert np.abs(p.numpy()).max() <= bound
    assert [len(ws) for ws in m.all_weights] == [4, 4, 4, 4]
    assert [n for n, _ in nn.LSTM(2, 3, bias=False).named_parameters()] == ["weight_ih_l0", "weight_hh_l0"]


def test_errors():
    with pytest.raises(ValueError, match="proj_size"):
        nn.LSTM(3, 5, proj_size=2)
    with pytest.raises(ValueError, match="nonlinearity"):
        nn.RNN(3, 5, nonlinearity="gelu")
    with pytest.raises(ValueError, match="dropout"):
        nn.GRU(3, 5, dropout=1.5)
    with pytest.warns(UserWarning, match="num_layers greater than 1"):
        nn.GRU(3, 5, dropout=0.5)
    m = nn.LSTM(3, 5, num_layers=2)
    with pytest.raises(rt.ShapeError, match=r"Expected 3, got 4"):
        m(rt.randn(2, 1, 4))
    with pytest.raises(rt.ShapeError, match=r"expected hidden size \(2, 1, 5\), got \(1, 1, 5\)"):
        m(rt.randn(2, 1, 3), (rt.zeros(1, 1, 5), rt.zeros(2, 1, 5)))
    with pytest.raises(rt.ShapeError, match=r"expected cell size \(2, 1, 5\), got \(2, 1, 4\)"):
        m(rt.randn(2, 1, 3), (rt.zeros(2, 1, 5), rt.zeros(2, 1, 4)))
    with pytest.raises(rt.ShapeError, match="2-D or 3-D"):
        m(rt.randn(2, 1, 1, 3))
    with pytest.raises(rt.ShapeError, match="dtype"):
        m(rt.randn(2, 1, 3, dtype=rt.float64))
    with pytest.raises(rt.ShapeError, match="LSTMCell: expected hidden state of shape"):
        nn.LSTMCell(3, 5)(rt.randn(2, 3), (rt.zeros(2, 4), rt.zeros(2, 5)))


def test_meta_model_runs_shape_only():
    with rt.meta():
        m = nn.GRU(16, 32, num_layers=2, batch_first=True)
    assert all(p.device.type == "meta" for p in m.parameters())
    out, h = m(rt.randn(4, 9, 16, device="meta"))
    assert out.shape == (4, 9, 32) and h.shape == (2, 4, 32) and out.dtype is rt.float32


def test_dropout_between_layers_only_in_training():
    from flopcount.runtime.ops import dropout as dropout_ops
    if not hasattr(dropout_ops, "dropout"):
        pytest.skip("the dropout op is not registered yet")
    m = nn.LSTM(3, 4, num_layers=3, dropout=0.5)
    x = rt.randn(5, 2, 3)
    _, events = record(lambda: m(x))
    assert sum(e.op.name == "dropout" for e in events) == 2  # after layers 0 and 1, not the last
    m.eval()
    _, events = record(lambda: m(x))
    assert not any(e.op.name == "dropout" for e in events)


# --- PyTorch on the same weights --------------------------------------------------------------

def _torch_module(torch, mode, *args, **kwargs):
    if mode.startswith("RNN"):
        return torch.nn.RNN(*args, nonlinearity="tanh" if mode == "RNN_TANH" else "relu", **kwargs)
    return getattr(torch.nn, mode)(*args, **kwargs)


def _load_from_torch(ours, theirs):
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()}, strict=True)


OPTIONS = [  # num_layers, bias, batch_first, bidirectional, unbatched, with_hx, dropout (in eval)
    (1, True, False, False, False, False, 0.0),
    (1, False, True, False, False, True, 0.0),
    (2, True, True, True, False, True, 0.3),
    (2, True, False, True, True, True, 0.0),
    (3, False, False, True, False, False, 0.0),
    (2, True, False, False, True, False, 0.0),
]


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: "-".join(str(v) for v in o))
def test_matches_torch_forward_and_backward(mode, options):
    torch = pytest.importorskip("torch")
    layers, bias, batch_first, bidir, unbatched, with_hx, dropout = options
    kwargs = dict(num_layers=layers, bias=bias, batch_first=batch_first, bidirectional=bidir, dropout=dropout)
    theirs = _torch_module(torch, mode, 4, 6, **kwargs).eval()
    ours = make(mode, 4, 6, **kwargs).eval()
    _load_from_torch(ours, theirs)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 4) if unbatched else ((3, 5, 4) if batch_first else (5, 3, 4))).astype(np.float32)
    dirs = 2 if bidir else 1
    state_shape = (layers * dirs, 6) if unbatched else (layers * dirs, 3, 6)
    states = [rng.standard_normal(state_shape).astype(np.float32) for _ in range(2 if mode == "LSTM" else 1)]

    def run(lib, module, make_tensor):
        xt = make_tensor(x)
        st = [make_tensor(s) for s in states]
        hx = None if not with_hx else (tuple(st) if mode == "LSTM" else st[0])
        out, hn = module(xt, hx)
        hn = list(hn) if mode == "LSTM" else [hn]
        loss = (out * make_tensor(np.cos(np.arange(out.numel()).reshape(out.shape)).astype(np.float32))).sum()
        for i, h in enumerate(hn):
            loss = loss + (h * h).sum() * (i + 1)
        loss.backward()
        return out, hn, xt, st

    t_out, t_hn, t_x, t_st = run(torch, theirs, lambda a: torch.tensor(a, requires_grad=True))
    o_out, o_hn, o_x, o_st = run(rt, ours, lambda a: rt.tensor(a, requires_grad=True))
    tol = dict(rtol=1e-5, atol=2e-6)
    np.testing.assert_allclose(o_out.numpy(), t_out.detach().numpy(), **tol)
    for o, t in zip(o_hn, t_hn):
        np.testing.assert_allclose(o.numpy(), t.detach().numpy(), **tol)
    np.testing.assert_allclose(o_x.grad.numpy(), t_x.grad.numpy(), rtol=1e-4, atol=1e-5)
    if with_hx:
        for o, t in zip(o_st, t_st):
            np.testing.assert_allclose(o.grad.numpy(), t.grad.numpy(), rtol=1e-4, atol=1e-5)
    t_params = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), t_params[name].grad.numpy(), rtol=1e-4, atol=1e-5,
                                   err_msg=name)


@pytest.mark.parametrize("mode,batched,bias", list(itertools.product(["RNN_TANH", "RNN_RELU", "LSTM", "GRU"],
                                                                     [True, False], [True, False])))
def test_cells_match_torch(mode, batched, bias):
    torch = pytest.importorskip("torch")
    name = {"RNN_TANH": "RNNCell", "RNN_RELU": "RNNCell", "LSTM": "LSTMCell", "GRU": "GRUCell"}[mode]
    kw = {"nonlinearity": "relu"} if mode == "RNN_RELU" else {}
    theirs = getattr(torch.nn, name)(3, 5, bias=bias, **kw)
    ours = getattr(nn, name)(3, 5, bias=bias, **kw)
    _load_from_torch(ours, theirs)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3) if batched else (3,)).astype(np.float32)
    h = rng.standard_normal((2, 5) if batched else (5,)).astype(np.float32)
    c = rng.standard_normal(h.shape).astype(np.float32)

    def run(module, make_tensor):
        xt, ht, ct = make_tensor(x), make_tensor(h), make_tensor(c)
        out = module(xt, (ht, ct)) if mode == "LSTM" else module(xt, ht)
        outs = out if isinstance(out, tuple) else (out,)
        loss = outs[0].sum() + (outs[-1] * outs[-1]).sum()
        loss.backward()
        return outs, (xt, ht, ct)

    t_outs, t_in = run(theirs, lambda a: torch.tensor(a, requires_grad=True))
    o_outs, o_in = run(ours, lambda a: rt.tensor(a, requires_grad=True))
    for o, t in zip(o_outs, t_outs):
        np.testing.assert_allclose(o.numpy(), t.detach().numpy(), rtol=1e-5, atol=1e-6)
    for o, t in zip(o_in, t_in):
        if t.grad is not None:
            np.testing.assert_allclose(o.grad.numpy(), t.grad.numpy(), rtol=1e-5, atol=1e-6)
    t_params = dict(theirs.named_parameters())
    for pname, p in ours.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), t_params[pname].grad.numpy(), rtol=1e-5, atol=1e-6)


def test_repr_matches_torch():
    torch = pytest.importorskip("torch")
    assert repr(nn.LSTM(3, 4, 2, dropout=0.5, batch_first=True)) == \
        repr(torch.nn.LSTM(3, 4, 2, dropout=0.5, batch_first=True))
    assert repr(nn.RNNCell(3, 4, nonlinearity="relu", bias=False)) == \
        repr(torch.nn.RNNCell(3, 4, nonlinearity="relu", bias=False))


def test_docstring_examples():
    import doctest

    from flopcount.runtime.nn.modules import rnn

    result = doctest.testmod(rnn)
    assert result.attempted > 0 and result.failed == 0
