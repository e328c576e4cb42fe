"""Loss functions (composites of registered ops): hand-computed values, finite-difference
gradients, the legacy reduction flags, and torch on the same inputs for every option."""

import math

import numpy as np
import pytest

import flopcount.runtime as rt
from flopcount.runtime.ops.loss import legacy_reduction
from opcheck import check_op, op_costs, randn

F = rt.nn.functional
EXAMPLES: dict = {}  # no op of its own: every loss is built from registered ops

LOGITS = randn(5, 4)
TARGET = np.array([0, 3, 1, -100, 2])
WEIGHT = np.array([0.5, 1.0, 2.0, 1.5])


def _log_softmax(x, axis=1):
    shifted = x - x.max(axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis, keepdims=True))


def test_cross_entropy_by_hand():
    # two equal logits: −log(1/2) per sample
    assert math.isclose(F.cross_entropy(rt.tensor([[0.0, 0.0], [0.0, 0.0]]), rt.tensor([0, 1])).item(),
                        math.log(2), rel_tol=1e-6)


def test_weighted_mean_divides_by_the_weights_of_the_kept_targets():
    logp = _log_softmax(LOGITS)
    kept = TARGET != -100
    picked = -logp[np.arange(5)[kept], TARGET[kept]] * WEIGHT[TARGET[kept]]
    expected = picked.sum() / WEIGHT[TARGET[kept]].sum()
    check_op(F.cross_entropy, [LOGITS, TARGET, WEIGHT], lambda x, t, w: expected, grad_wrt=[0])


def test_label_smoothing_by_hand():
    eps, c = 0.1, 4
    logp = _log_softmax(LOGITS[:3])
    nll = -logp[np.arange(3), TARGET[:3]].mean()
    smooth = -logp.sum(1).mean() / c
    expected = (1 - eps) * nll + eps * smooth
    check_op(lambda x, t: F.cross_entropy(x, t, label_smoothing=eps), [LOGITS[:3], TARGET[:3]],
             lambda x, t: expected)


def test_probability_targets_and_spatial_inputs():
    probs = np.abs(randn(5, 4, seed=1))
    probs /= probs.sum(1, keepdims=True)
    check_op(lambda x, p: F.cross_entropy(x, p), [LOGITS, probs],
             lambda x, p: -(p * _log_softmax(x)).sum(1).mean())
    x = randn(2, 4, 3, seed=2)
    t = np.array([[0, 1, 3], [2, 2, 0]])
    picked = -np.take_along_axis(_log_softmax(x), t[:, None], 1)[:, 0]
    check_op(lambda x, t: F.cross_entropy(x, t, reduction="none"), [x, t], lambda x, t: picked)


def test_cost_is_the_sum_of_its_parts():
    costs = op_costs(lambda: F.cross_entropy(rt.tensor(LOGITS.astype(np.float32)), rt.tensor(TARGET)))
    assert costs["log_softmax"].flops == 5 * LOGITS.size
    assert "gather" in costs


def test_regression_losses_by_hand():
    x, y = rt.tensor([1.0, -2.0, 0.5]), rt.tensor([0.0, 0.0, 0.0])
    assert math.isclose(F.mse_loss(x, y).item(), (1 + 4 + 0.25) / 3, rel_tol=1e-6)
    assert math.isclose(F.l1_loss(x, y, reduction="sum").item(), 3.5, rel_tol=1e-6)
    # beta = 1: 0.5 (|d| − 0.5), 1.5 (|d| − 0.5), 0.125 (0.5 d²)
    assert math.isclose(F.smooth_l1_loss(x, y, reduction="sum").item(), 0.5 + 1.5 + 0.125, rel_tol=1e-6)
    # delta = 2: all quadratic except none: 0.5, 2.0, 0.125
    assert math.isclose(F.huber_loss(x, y, reduction="sum", delta=2.0).item(), 0.5 + 2.0 + 0.125, rel_tol=1e-6)


def test_binary_cross_entropy_by_hand_and_clamped_logs():
    p, t = rt.tensor([0.25, 0.5]), rt.tensor([1.0, 0.0])
    assert math.isclose(F.binary_cross_entropy(p, t).item(), (math.log(4) + math.log(2)) / 2, rel_tol=1e-6)
    with np.errstate(divide="ignore"):  # log(0) = -inf, then clamped
        assert F.binary_cross_entropy(rt.tensor([0.0]), rt.tensor([1.0])).item() == pytest.approx(100.0)
    big = rt.tensor([1000.0, -1000.0])
    np.testing.assert_allclose(F.binary_cross_entropy_with_logits(big, rt.tensor([0.0, 1.0]), reduction="none")
                               .numpy(), [1000.0, 1000.0])


def test_legacy_flags_map_like_pytorch():
    assert legacy_reduction(None, None, "sum") == "sum"
    assert legacy_reduction(False, None, "mean") == "sum"
    assert legacy_reduction(True, False, "mean") == "none"
    assert F.mse_loss(rt.ones(3), rt.zeros(3), size_average=False).item() == 3.0


def test_errors_name_the_loss_and_shapes():
    with pytest.raises(rt.ShapeError, match=r"nll_loss: target \(3,\) does not fit input \(2, 4\)"):
        F.nll_loss(rt.ones(2, 4), rt.tensor([0, 1, 2]))
    with pytest.raises(rt.ShapeError, match=r"mse_loss: target \(2,\) must have the shape of the input \(3,\)"):
        F.mse_loss(rt.ones(3), rt.ones(2))
    with pytest.raises(rt.ShapeError, match="nll_loss: target must hold class indices"):
        F.nll_loss(rt.ones(2, 4), rt.ones(2))
    with pytest.raises(ValueError, match="reduction must be one of"):
        F.l1_loss(rt.ones(3), rt.ones(3), reduction="avg")


# --- against torch, float64 inputs ---------------------------------------------------------------

CLASS_CASES = [
    ("cross_entropy", {}), ("cross_entropy", {"weight": True}), ("cross_entropy", {"label_smoothing": 0.2}),
    ("cross_entropy", {"weight": True, "label_smoothing": 0.2}), ("cross_entropy", {"ignore_index": 1}),
    ("nll_loss", {}), ("nll_loss", {"weight": True}),
]


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("name,opts", CLASS_CASES, ids=[f"{n}-{sorted(o)}" for n, o in CLASS_CASES])
@pytest.mark.parametrize("spatial", [False, True])
def test_class_losses_match_torch(name, opts, reduction, spatial):
    torch = pytest.importorskip("torch")
    x = randn(5, 4, 3, seed=3) if spatial else LOGITS
    t = np.random.default_rng(4).integers(0, 4, (5, 3)) if spatial else TARGET
    if opts.get("ignore_index") == 1:
        t = np.where(t == -100, 1, t)  # -100 is an ordinary (invalid) class once it is not the ignored one
    kwargs = dict(opts, reduction=reduction)
    w = kwargs.pop("weight", False)
    xa, xt = rt.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ya = getattr(F, name)(xa, rt.tensor(t), rt.tensor(WEIGHT) if w else None, **kwargs)
    yt = getattr(torch.nn.functional, name)(xt, torch.tensor(t), torch.tensor(WEIGHT) if w else None, **kwargs)
    _compare(torch, (ya, xa), (yt, xt))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("smoothing", [0.0, 0.3])
def test_probability_targets_match_torch(reduction, smoothing):
    torch = pytest.importorskip("torch")
    probs = np.abs(randn(5, 4, seed=5))
    probs /= probs.sum(1, keepdims=True)
    xa, xt = rt.tensor(LOGITS, requires_grad=True), torch.tensor(LOGITS, requires_grad=True)
    ya = F.cross_entropy(xa, rt.tensor(probs), rt.tensor(WEIGHT), reduction=reduction, label_smoothing=smoothing)
    yt = torch.nn.functional.cross_entropy(xt, torch.tensor(probs), torch.tensor(WEIGHT), reduction=reduction,
                                           label_smoothing=smoothing)
    _compare(torch, (ya, xa), (yt, xt))


PAIR_CASES = [("mse_loss", {}), ("l1_loss", {}), ("smooth_l1_loss", {"beta": 0.5}), ("smooth_l1_loss", {"beta": 0.0}),
              ("huber_loss", {"delta": 0.7}), ("binary_cross_entropy", {}),
              ("binary_cross_entropy_with_logits", {}), ("binary_cross_entropy_with_logits", {"pos_weight": True})]


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("name,opts", PAIR_CASES, ids=[f"{n}-{sorted(o)}" for n, o in PAIR_CASES])
def test_pairwise_losses_match_torch(name, opts, reduction):
    torch = pytest.importorskip("torch")
    x = randn(5, 4, seed=6) * 3
    y = randn(5, 4, seed=7)
    if name.startswith("binary"):
        y = np.random.default_rng(8).random((5, 4))
        if name == "binary_cross_entropy":
            x = np.random.default_rng(9).random((5, 4)) * 0.98 + 0.01
    kwargs = dict(opts, reduction=reduction)
    ours, theirs = dict(kwargs), dict(kwargs)
    if kwargs.get("pos_weight"):
        ours["pos_weight"], theirs["pos_weight"] = rt.tensor(WEIGHT + 1), torch.tensor(WEIGHT + 1)
    xa, xt = rt.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ya_, yt_ = rt.tensor(y, requires_grad=True), torch.tensor(y, requires_grad=True)
    _compare(torch, (getattr(F, name)(xa, ya_, **ours), xa, ya_), (getattr(torch.nn.functional, name)(xt, yt_, **theirs), xt, yt_))


def _compare(torch, ours, theirs):
    out_a, *inputs_a = ours
    out_t, *inputs_t = theirs
    g = randn(*out_a.shape, seed=10)
    (out_a * rt.tensor(g)).sum().backward()
    (out_t * torch.tensor(g)).sum().backward()
    np.testing.assert_allclose(out_a.numpy(), out_t.detach().numpy(), rtol=1e-6, atol=1e-9)
    for a, t in zip(inputs_a, inputs_t):
        np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), rtol=1e-6, atol=1e-9)
