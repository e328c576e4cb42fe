"""Loss modules: PyTorch's constructor arguments and buffers, values and gradients against torch."""

import numpy as np
import pytest

import flopcount.runtime as rt
from opcheck import randn

nn = rt.nn
WEIGHT = np.array([0.5, 1.0, 2.0], dtype=np.float32)


def test_weights_are_buffers_in_the_state_dict():
    assert list(nn.CrossEntropyLoss(weight=rt.tensor(WEIGHT)).state_dict()) == ["weight"]
    assert list(nn.CrossEntropyLoss().state_dict()) == []
    assert list(nn.BCEWithLogitsLoss(pos_weight=rt.tensor(WEIGHT)).state_dict()) == ["pos_weight"]
    assert list(nn.MSELoss().parameters()) == []


def test_legacy_flags_set_the_reduction():
    assert nn.L1Loss(size_average=False).reduction == "sum"
    assert nn.NLLLoss(reduce=False).reduction == "none"
    assert repr(nn.MSELoss(reduction="sum")) == "MSELoss(reduction='sum')"


def _classification():
    x = randn(6, 3, seed=1).astype(np.float32)
    t = np.array([0, 2, 1, 1, -100, 2])
    return x, t


CASES = [
    ("CrossEntropyLoss", {}, "class"), ("CrossEntropyLoss", {"weight": True, "label_smoothing": 0.1}, "class"),
    ("CrossEntropyLoss", {"reduction": "none"}, "class"), ("CrossEntropyLoss", {}, "probs"),
    ("NLLLoss", {"weight": True, "reduction": "sum"}, "logprob"), ("MSELoss", {}, "pair"),
    ("L1Loss", {"reduction": "sum"}, "pair"), ("SmoothL1Loss", {"beta": 0.5}, "pair"), ("HuberLoss", {"delta": 0.5}, "pair"),
    ("BCELoss", {"weight": True}, "prob"), ("BCEWithLogitsLoss", {"pos_weight": True}, "logit"),
]


@pytest.mark.parametrize("name,kwargs,kind", CASES, ids=[f"{c[0]}-{sorted(c[1])}-{c[2]}" for c in CASES])
def test_matches_torch(name, kwargs, kind):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(2)
    ours_kw, theirs_kw = dict(kwargs), dict(kwargs)
    for key in ("weight", "pos_weight"):
        if kwargs.get(key):
            ours_kw[key], theirs_kw[key] = rt.tensor(WEIGHT), torch.tensor(WEIGHT)
    ours, theirs = getattr(nn, name)(**ours_kw), getattr(torch.nn, name)(**theirs_kw)
    x, t = _classification()
    if kind == "probs":
        t = rng.random((6, 3)).astype(np.float32)
        t /= t.sum(1, keepdims=True)
    elif kind == "logprob":
        x = x - np.log(np.exp(x).sum(1, keepdims=True))
    elif kind == "pair":
        t = rng.standard_normal((6, 3)).astype(np.float32)
    elif kind in ("prob", "logit"):
        t = rng.random((6, 3)).astype(np.float32)
        if kind == "prob":
            x = rng.random((6, 3)).astype(np.float32) * 0.98 + 0.01
    xa, xt = rt.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ya, yt = ours(xa, rt.tensor(t)), theirs(xt, torch.tensor(t))
    ya.sum().backward()
    yt.sum().backward()
    np.testing.assert_allclose(ya.numpy(), yt.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(xa.grad.numpy(), xt.grad.numpy(), rtol=1e-5, atol=1e-6)
