"""Activation layers: PyTorch's constructor arguments, forward and backward against torch, and
PReLU's parameter (name, shape, init, state dict)."""

import numpy as np
import pytest

import flopcount.runtime as rt
from opcheck import randn

nn = rt.nn

CASES = [
    ("ReLU", {}), ("ReLU6", {}), ("LeakyReLU", {"negative_slope": 0.3}), ("ELU", {"alpha": 0.5}), ("SELU", {}),
    ("CELU", {"alpha": 2.0}), ("GELU", {}), ("GELU", {"approximate": "tanh"}), ("SiLU", {}), ("Mish", {}),
    ("Hardswish", {}), ("Hardsigmoid", {}), ("Hardtanh", {"min_val": -2.0, "max_val": 0.5}),
    ("Softplus", {"beta": 0.5, "threshold": 5.0}), ("LogSigmoid", {}), ("Softsign", {}), ("Tanhshrink", {}),
    ("Sigmoid", {}), ("Tanh", {}), ("Softmax", {"dim": 1}), ("Softmax", {}), ("Softmin", {"dim": -1}),
    ("LogSoftmax", {"dim": 0}), ("GLU", {"dim": 1}), ("PReLU", {}), ("PReLU", {"num_parameters": 4, "init": 0.1}),
]


@pytest.mark.filterwarnings("ignore:Implicit dimension choice")  # torch on Softmax() without dim
@pytest.mark.parametrize("name,kwargs", CASES, ids=[f"{n}-{sorted(k.items())}" for n, k in CASES])
def test_matches_torch(name, kwargs):
    torch = pytest.importorskip("torch")
    ours, theirs = getattr(nn, name)(**kwargs), getattr(torch.nn, name)(**kwargs)
    ours.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})
    x = (randn(3, 4, 5, seed=1) * 3).astype(np.float32)
    xa, xt = rt.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ya, yt = ours(xa), theirs(xt)
    g = randn(*ya.shape, seed=2).astype(np.float32)
    (ya * rt.tensor(g)).sum().backward()
    (yt * torch.tensor(g)).sum().backward()
    np.testing.assert_allclose(ya.numpy(), yt.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(xa.grad.numpy(), xt.grad.numpy(), rtol=1e-5, atol=1e-5)
    for (na, pa), (nt, pt) in zip(ours.named_parameters(), theirs.named_parameters()):
        assert na == nt
        np.testing.assert_allclose(pa.grad.numpy(), pt.grad.numpy(), rtol=1e-5, atol=1e-5)


def test_prelu_parameter():
    m = nn.PReLU(3, init=0.2)
    assert [(n, p.shape) for n, p in m.named_parameters()] == [("weight", (3,))]
    np.testing.assert_allclose(m.weight.numpy(), [0.2] * 3)
    out = m(rt.tensor([[-1.0, 2.0, -3.0]]))
    np.testing.assert_allclose(out.numpy(), [[-0.2, 2.0, -0.6]], rtol=1e-6)


def test_no_other_activation_has_parameters():
    for name, kwargs in CASES:
        if name != "PReLU":
            assert list(getattr(nn, name)(**kwargs).parameters()) == []


def test_repr_shows_options():
    assert repr(nn.LeakyReLU(0.2)) == "LeakyReLU(negative_slope=0.2)"
    assert repr(nn.GELU("tanh")) == "GELU(approximate='tanh')"
    assert repr(nn.ReLU(inplace=True)) == "ReLU(inplace=True)"


def test_hardtanh_rejects_min_above_max():
    with pytest.raises(ValueError, match="min_val 2 cannot be greater than max_val 1"):
        nn.Hardtanh(2, 1)
