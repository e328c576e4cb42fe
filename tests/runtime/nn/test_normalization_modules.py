"""Normalization layers: parameter and buffer names/shapes/initial values as PyTorch, running
statistics after several training steps equal torch's, eval mode, and forward/backward against
torch on the same weights."""

import numpy as np
import pytest

import flopcount.runtime as rt
from opcheck import op_costs

nn = rt.nn


def _state(module) -> dict:
    return {k: v.numpy() for k, v in module.state_dict().items()}


def test_batch_norm_parameters_and_buffers():
    bn = nn.BatchNorm2d(3)
    assert [(k, v.shape, v.dtype.name) for k, v in bn.state_dict().items()] == [
        ("weight", (3,), "float32"), ("bias", (3,), "float32"), ("running_mean", (3,), "float32"),
        ("running_var", (3,), "float32"), ("num_batches_tracked", (), "int64")]
    s = _state(bn)
    assert (s["weight"] == 1).all() and (s["bias"] == 0).all() and (s["running_var"] == 1).all()
    assert [n for n, _ in bn.named_parameters()] == ["weight", "bias"]  # buffers are not parameters
    assert list(nn.BatchNorm1d(3, affine=False, track_running_stats=False).state_dict()) == []


def test_batch_norm_running_stats_by_hand():
    bn = nn.BatchNorm1d(2, momentum=0.5)
    x = np.array([[1.0, 10.0], [3.0, 20.0]], dtype=np.float32)
    bn(rt.tensor(x))
    np.testing.assert_allclose(bn.running_mean.numpy(), [1.0, 7.5])  # 0.5·0 + 0.5·mean
    np.testing.assert_allclose(bn.running_var.numpy(), [0.5 + 0.5 * 2.0, 0.5 + 0.5 * 50.0])  # unbiased var
    assert bn.num_batches_tracked.item() == 1


def test_batch_norm_eval_uses_running_stats_and_the_cheap_rule():
    bn = nn.BatchNorm2d(2).eval()
    bn.running_mean.fill_(1.0)
    bn.running_var.fill_(4.0)
    x = rt.ones(1, 2, 2, 2) * 3.0
    np.testing.assert_allclose(bn(x).numpy(), np.full((1, 2, 2, 2), 2 / np.sqrt(4 + 1e-5)), rtol=1e-6)
    assert bn.num_batches_tracked.item() == 0
    assert op_costs(lambda: bn(x))["batch_norm"].flops == 2 * 8
    bn.train()
    assert op_costs(lambda: bn(x + 0.0))["batch_norm"].flops == 6 * 8


def test_batch_norm_input_dims_are_checked():
    with pytest.raises(rt.ShapeError, match=r"BatchNorm2d: expected 4D input \(got 3D input"):
        nn.BatchNorm2d(3)(rt.ones(2, 3, 4))
    with pytest.raises(rt.ShapeError, match=r"BatchNorm1d: expected 2D or 3D input"):
        nn.BatchNorm1d(3)(rt.ones(2, 3, 4, 4))


@pytest.mark.parametrize("cls,shape,kwargs", [
    ("BatchNorm1d", (6, 3), {}), ("BatchNorm1d", (4, 3, 5), {"momentum": None}),
    ("BatchNorm2d", (4, 3, 3, 2), {"affine": False}), ("BatchNorm3d", (2, 3, 2, 2, 2), {"eps": 1e-3}),
    ("BatchNorm2d", (4, 3, 2, 2), {"track_running_stats": False}),
    ("InstanceNorm1d", (3, 3, 6), {}), ("InstanceNorm2d", (2, 3, 4, 4), {"affine": True, "track_running_stats": True}),
    ("InstanceNorm3d", (3, 2, 2, 3), {"affine": True}),
])
def test_training_steps_then_eval_match_torch(cls, shape, kwargs):
    torch = pytest.importorskip("torch")
    ours, theirs = getattr(nn, cls)(3, **kwargs), getattr(torch.nn, cls)(3, **kwargs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    rng = np.random.default_rng(0)
    with torch.no_grad():
        for p in theirs.parameters():  # non-trivial affine parameters
            p.copy_(torch.tensor(rng.standard_normal(p.shape).astype(np.float32)))
    ours.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})
    for _ in range(3):
        x = (rng.standard_normal(shape) * 2 + 1).astype(np.float32)
        xa, xt = rt.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        ya, yt = ours(xa), theirs(xt)
        g = rng.standard_normal(shape).astype(np.float32)
        (ya * rt.tensor(g)).sum().backward()
        (yt * torch.tensor(g)).sum().backward()
        np.testing.assert_allclose(ya.numpy(), yt.detach().numpy(), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(xa.grad.numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-4)
    mine, ref = _state(ours), {k: v.numpy() for k, v in theirs.state_dict().items()}
    for key in ref:
        np.testing.assert_allclose(mine[key], ref[key], rtol=1e-5, atol=1e-6, err_msg=key)
    for (n, pa), (_, pt) in zip(ours.named_parameters(), theirs.named_parameters()):
        np.testing.assert_allclose(pa.grad.numpy(), pt.grad.numpy(), rtol=1e-4, atol=1e-4, err_msg=n)
    ours.eval()
    theirs.eval()
    x = (rng.standard_normal(shape)).astype(np.float32)
    np.testing.assert_allclose(ours(rt.tensor(x)).numpy(), theirs(torch.tensor(x)).detach().numpy(),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("make", [
    lambda m: m.LayerNorm(5), lambda m: m.LayerNorm((3, 5), elementwise_affine=False),
    lambda m: m.LayerNorm(5, bias=False, eps=1e-3), lambda m: m.GroupNorm(2, 4), lambda m: m.GroupNorm(4, 4, affine=False),
    lambda m: m.RMSNorm(5), lambda m: m.RMSNorm((3, 5), eps=1e-4), lambda m: m.RMSNorm(5, elementwise_affine=False),
], ids=["ln", "ln-noaffine", "ln-nobias", "gn", "gn-noaffine", "rms", "rms-eps", "rms-noaffine"])
def test_layer_group_rms_norm_match_torch(make):
    torch = pytest.importorskip("torch")
    ours, theirs = make(nn), make(torch.nn)
    assert [(k, tuple(v.shape)) for k, v in ours.state_dict().items()] == \
        [(k, tuple(v.shape)) for k, v in theirs.state_dict().items()]
    rng = np.random.default_rng(1)
    with torch.no_grad():
        for p in theirs.parameters():
            p.copy_(torch.tensor(rng.standard_normal(p.shape).astype(np.float32)))
    ours.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})
    x = (rng.standard_normal((2, 4, 3, 5)) * 3).astype(np.float32)
    xa, xt = rt.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ya, yt = ours(xa), theirs(xt)
    g = rng.standard_normal(x.shape).astype(np.float32)
    (ya * rt.tensor(g)).sum().backward()
    (yt * torch.tensor(g)).sum().backward()
    np.testing.assert_allclose(ya.numpy(), yt.detach().numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(xa.grad.numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-4)
    for (n, pa), (_, pt) in zip(ours.named_parameters(), theirs.named_parameters()):
        np.testing.assert_allclose(pa.grad.numpy(), pt.grad.numpy(), rtol=1e-4, atol=1e-4, err_msg=n)


def test_group_norm_checks_divisibility():
    with pytest.raises(ValueError, match=r"num_channels \(6\) must be divisible by num_groups \(4\)"):
        nn.GroupNorm(4, 6)


def test_meta_model_runs_shapes_only():
    with rt.meta():
        bn = nn.BatchNorm2d(8)
        ln = nn.LayerNorm(8)
    x = rt.empty(2, 8, 4, 4, device="meta")
    assert bn(x).shape == (2, 8, 4, 4) and bn.running_mean.data is None
    assert ln(rt.empty(2, 5, 8, device="meta")).shape == (2, 5, 8)
