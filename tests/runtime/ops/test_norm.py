"""Normalizations: values against numpy, gradients by finite differences, COUNTING.md costs,
running-statistics updates, and torch on the same inputs."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import flopcount.runtime as rt
from flopcount.runtime.ops.norm import BatchNormBackward
from opcheck import Example, check_op, op_costs, randn, record, run_example

F = rt.nn.functional
X = randn(4, 3, 5) * 2 + 1
W, B = randn(3, seed=1), randn(3, seed=2)
N = X.size


def _standardize(x, axes):
    return (x - x.mean(axes, keepdims=True)) / np.sqrt(x.var(axes, keepdims=True) + 1e-5)


def _bn_ref(x, w, b):
    return _standardize(x, (0, 2)) * w[:, None] + b[:, None]


def _bn_backward_ref(g, x, w, batch_mean, batch_var):
    """The textbook gradient of training-mode batch norm (channel dim 1), in float64."""
    axes = (0,) + tuple(range(2, x.ndim))
    view = (1, -1) + (1,) * (x.ndim - 2)
    xhat = (x - batch_mean.reshape(view)) / np.sqrt(batch_var.reshape(view) + 1e-5)
    gxhat = g * w.reshape(view)
    gx = (gxhat - gxhat.mean(axes, keepdims=True) - xhat * (gxhat * xhat).mean(axes, keepdims=True)) \
        / np.sqrt(batch_var.reshape(view) + 1e-5)
    return gx, (g * xhat).sum(axes), g.sum(axes)


def _group_ref(x, w, b, groups):
    n = x.shape[0]
    y = _standardize(x.reshape(n, groups, -1), (2,)).reshape(x.shape)
    view = (1, -1) + (1,) * (x.ndim - 2)
    return y * w.reshape(view) + b.reshape(view)


EXAMPLES = {
    # training: 2 per element for the folded scale/shift + 4 for the batch statistics
    "batch_norm": Example(lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True), [X, W, B], _bn_ref,
                          flops=6 * N),
    # subtract the mean, multiply by g, two sums, and gx's two multiplies and two adds
    "batch_norm_backward": Example(
        lambda g, x, w, m, v: rt.apply(BatchNormBackward, g, x, w, m, v, eps=1e-5),
        [randn(4, 3, 5, seed=6), X, W, X.mean((0, 2)), X.var((0, 2))], _bn_backward_ref, grad=False,
        flops=8 * N),
    # 5 per element + weight and bias (1 each)
    "layer_norm": Example(lambda x, w, b: F.layer_norm(x, (5,), w, b), [X, randn(5, seed=3), randn(5, seed=4)],
                          lambda x, w, b: _standardize(x, (2,)) * w + b, flops=7 * N),
    "group_norm": Example(lambda x, w, b: F.group_norm(x, 3, w, b), [X, W, B],
                          lambda x, w, b: _group_ref(x, w, b, 3), flops=7 * N),
    # COUNTING.md's norm row (5 per element) + the weight
    "rms_norm": Example(lambda x, w: F.rms_norm(x, (3, 5), w, 1e-6), [X, randn(3, 5, seed=5)],
                        lambda x, w: x / np.sqrt((x * x).mean((1, 2), keepdims=True) + 1e-6) * w, flops=6 * N),
}


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example(name):
    run_example(name, EXAMPLES[name])


def test_batch_norm_inference_uses_running_stats_and_costs_two_per_element():
    rm, rv = randn(3, seed=6), np.abs(randn(3, seed=7)) + 0.5

    def ref(x, w, b, rm, rv):
        view = (1, 3, 1)
        return (x - rm.reshape(view)) / np.sqrt(rv.reshape(view) + 1e-5) * w.reshape(view) + b.reshape(view)

    fn = lambda x, w, b, rm, rv: F.batch_norm(x, rm, rv, w, b, training=False)  # noqa: E731
    check_op(fn, [X, W, B, rm, rv], ref, grad_wrt=[0, 1, 2])
    costs = op_costs(lambda: fn(*(rt.tensor(a.astype(np.float32)) for a in (X, W, B, rm, rv))))
    assert costs["batch_norm"].flops == 2 * N


def test_batch_norm_updates_running_stats_in_place():
    x = rt.tensor(X)
    rm, rv = rt.zeros(3, dtype=rt.float64), rt.ones(3, dtype=rt.float64)
    buffers = (rm.data, rv.data)
    F.batch_norm(x, rm, rv, training=True, momentum=0.25)
    n = X.shape[0] * X.shape[2]
    np.testing.assert_allclose(rm.numpy(), 0.25 * X.mean((0, 2)))
    np.testing.assert_allclose(rv.numpy(), 0.75 + 0.25 * X.var((0, 2)) * n / (n - 1))  # unbiased
    assert rm.data is buffers[0] and rv.data is buffers[1]


def test_batch_norm_statistics_leave_the_op_as_outputs():
    from opcheck import record

    out, events = record(lambda: F.batch_norm(rt.tensor(X), rt.zeros(3, dtype=rt.float64),
                                              rt.ones(3, dtype=rt.float64), training=True))
    bn = [e for e in events if e.op.name == "batch_norm"]
    assert len(bn) == 1 and len(bn[0].outputs) == 3
    np.testing.assert_allclose(bn[0].outputs[1].numpy(), X.mean((0, 2)))
    np.testing.assert_allclose(bn[0].outputs[2].numpy(), X.var((0, 2)))  # biased: the one that normalizes
    # the running update is visible as ordinary ops, not hidden in the kernel
    assert {"mul", "add"} <= {e.op.name for e in events}


def test_norms_without_affine_count_five_per_element():
    x = rt.tensor(X.astype(np.float32))
    assert op_costs(lambda: F.layer_norm(x, (3, 5)))["layer_norm"].flops == 5 * N
    assert op_costs(lambda: F.group_norm(x, 1))["group_norm"].flops == 5 * N
    assert op_costs(lambda: F.layer_norm(x, (5,), rt.ones(5)))["layer_norm"].flops == 6 * N
    assert op_costs(lambda: F.rms_norm(x, (5,)))["rms_norm"].flops == 5 * N  # COUNTING.md norm row


@pytest.mark.parametrize("affine", [True, False])
def test_instance_norm_is_a_group_norm_per_channel(affine):
    x = randn(2, 3, 4, 4)
    w, b = (W, B) if affine else (np.ones(3), np.zeros(3))
    fn = (lambda x, w, b: F.instance_norm(x, weight=w, bias=b)) if affine else (lambda x: F.instance_norm(x))
    arrays = [x, W, B] if affine else [x]
    check_op(fn, arrays, lambda x, *_: _group_ref(x, w, b, 3))
    costs = op_costs(lambda: fn(*(rt.tensor(a.astype(np.float32)) for a in arrays)))
    assert costs["group_norm"].flops == (7 if affine else 5) * x.size


@settings(max_examples=20, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=3).map(tuple), st.integers(1, 2))
def test_layer_norm_any_trailing_shape(lead, k):
    shape = lead + (3, 2)[:k]
    x = randn(*shape)
    axes = tuple(range(len(shape) - k, len(shape)))
    check_op(lambda x: F.layer_norm(x, shape[-k:]), [x], lambda x: _standardize(x, axes))


def test_rms_norm_default_eps_is_the_dtype_epsilon():
    x = np.full((1, 4), 1e-4, dtype=np.float32)
    out = F.rms_norm(rt.tensor(x), (4,)).numpy()
    eps = np.finfo(np.float32).eps
    np.testing.assert_allclose(out, x / np.sqrt(1e-8 + eps), rtol=1e-5)


def test_bad_shapes_name_the_op():
    with pytest.raises(rt.ShapeError, match=r"batch_norm: weight has shape \(4,\), expected \(3,\)"):
        F.batch_norm(rt.ones(2, 3), None, None, rt.ones(4), training=True)
    with pytest.raises(rt.ShapeError, match="batch_norm: running_mean and running_var are needed"):
        F.batch_norm(rt.ones(2, 3), None, None, training=False)
    with pytest.raises(rt.ShapeError, match="expected more than 1 value per channel"):
        F.batch_norm(rt.ones(1, 3), None, None, training=True)
    with pytest.raises(rt.ShapeError, match=r"layer_norm: normalized_shape \(4,\) does not match .* \(2, 3\)"):
        F.layer_norm(rt.ones(2, 3), (4,))
    with pytest.raises(rt.ShapeError, match=r"group_norm: 6 channels of input \(2, 6\) cannot be split into 4"):
        F.group_norm(rt.ones(2, 6), 4)
    with pytest.raises(rt.ShapeError, match=r"rms_norm: weight has shape \(2,\), expected \(3,\)"):
        F.rms_norm(rt.ones(2, 3), (3,), rt.ones(2))
    with pytest.raises(rt.ShapeError, match="instance_norm: expected more than 1 spatial element"):
        F.instance_norm(rt.ones(2, 3, 1))


# --- against torch, float32 ----------------------------------------------------------------------

def _torch_pair(torch, arrays):
    ours = [rt.tensor(a, requires_grad=True) if a is not None else None for a in arrays]
    theirs = [torch.tensor(a, requires_grad=True) if a is not None else None for a in arrays]
    return ours, theirs


def _compare(torch, ours, theirs, ya, yt):
    g = randn(*ya.shape, seed=9).astype(np.float32)
    (ya * rt.tensor(g)).sum().backward()
    (yt * torch.tensor(g)).sum().backward()
    np.testing.assert_allclose(ya.numpy(), yt.detach().numpy(), rtol=1e-5, atol=1e-5)
    for a, t in zip(ours, theirs):
        if a is not None:
            np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shape", [(6, 3), (4, 3, 5), (2, 3, 4, 4), (2, 3, 2, 2, 3)])
@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_matches_torch(shape, training, affine):
    torch = pytest.importorskip("torch")
    x = (randn(*shape, seed=11) * 2 + 1).astype(np.float32)
    w, b = (randn(3, seed=12).astype(np.float32), randn(3, seed=13).astype(np.float32)) if affine else (None, None)
    rm, rv = randn(3, seed=14).astype(np.float32), (np.abs(randn(3, seed=15)) + 0.5).astype(np.float32)
    ours, theirs = _torch_pair(torch, [x, w, b])
    rma, rva, rmt, rvt = rt.tensor(rm), rt.tensor(rv), torch.tensor(rm), torch.tensor(rv)
    ya = F.batch_norm(ours[0], rma, rva, ours[1], ours[2], training, 0.3, 1e-4)
    yt = torch.nn.functional.batch_norm(theirs[0], rmt, rvt, theirs[1], theirs[2], training, 0.3, 1e-4)
    _compare(torch, ours, theirs, ya, yt)
    np.testing.assert_allclose(rma.numpy(), rmt.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(rva.numpy(), rvt.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_fused_gradient_equals_the_composite_one(affine):
    """A first-order backward takes batch_norm_backward; with create_graph the composite of
    registered ops runs, and its gradient can itself be differentiated."""
    x0 = (randn(4, 3, 6, 6, seed=41) * 3 + 2)
    w0, b0 = randn(3, seed=42), randn(3, seed=43)
    g0 = randn(4, 3, 6, 6, seed=44)

    def grads(create_graph):
        x = rt.tensor(x0, requires_grad=True)
        w, b = (rt.tensor(w0, requires_grad=True), rt.tensor(b0, requires_grad=True)) if affine else (None, None)
        y = F.batch_norm(x, None, None, w, b, training=True)
        _, events = record(lambda: y.backward(rt.tensor(g0), create_graph=create_graph))
        ops = {e.op.name for e in events}
        assert ("batch_norm_backward" in ops) != create_graph
        return x, [t.grad for t in (x, w, b) if t is not None]

    _, fused = grads(False)
    x, composite = grads(True)
    for a, b in zip(fused, composite):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-10, atol=1e-12)
    first = composite[0].numpy().copy()
    (composite[0] * composite[0]).sum().backward()  # a second derivative through the composite
    assert np.abs(x.grad.numpy() - first).max() > 1e-6  # it added a nonzero d/dx of |gx|²


@pytest.mark.parametrize("weight,bias", [(True, True), (True, False), (False, False)])
def test_layer_group_rms_norm_match_torch(weight, bias):
    torch = pytest.importorskip("torch")
    tf = torch.nn.functional
    x = (randn(2, 4, 3, 5, seed=21) * 2).astype(np.float32)
    shape = (3, 5)
    w = randn(*shape, seed=22).astype(np.float32) if weight else None
    b = randn(*shape, seed=23).astype(np.float32) if bias else None
    ours, theirs = _torch_pair(torch, [x, w, b])
    _compare(torch, ours, theirs, F.layer_norm(ours[0], shape, ours[1], ours[2], 1e-4),
             tf.layer_norm(theirs[0], shape, theirs[1], theirs[2], 1e-4))
    ours, theirs = _torch_pair(torch, [x, w])
    _compare(torch, ours, theirs, F.rms_norm(ours[0], shape, ours[1]), tf.rms_norm(theirs[0], shape, theirs[1]))
    wc = randn(4, seed=24).astype(np.float32) if weight else None
    bc = randn(4, seed=25).astype(np.float32) if bias else None
    ours, theirs = _torch_pair(torch, [x, wc, bc])
    _compare(torch, ours, theirs, F.group_norm(ours[0], 2, ours[1], ours[2]),
             tf.group_norm(theirs[0], 2, theirs[1], theirs[2]))


@pytest.mark.parametrize("use_input_stats", [True, False])
def test_instance_norm_matches_torch(use_input_stats):
    torch = pytest.importorskip("torch")
    x = (randn(3, 4, 5, 2, seed=31) * 2 + 1).astype(np.float32)
    w, b = randn(4, seed=32).astype(np.float32), randn(4, seed=33).astype(np.float32)
    rm, rv = randn(4, seed=34).astype(np.float32), (np.abs(randn(4, seed=35)) + 0.5).astype(np.float32)
    ours, theirs = _torch_pair(torch, [x, w, b])
    rma, rva, rmt, rvt = rt.tensor(rm), rt.tensor(rv), torch.tensor(rm), torch.tensor(rv)
    ya = F.instance_norm(ours[0], rma, rva, ours[1], ours[2], use_input_stats, 0.2)
    yt = torch.nn.functional.instance_norm(theirs[0], rmt, rvt, theirs[1], theirs[2], use_input_stats, 0.2)
    _compare(torch, ours, theirs, ya, yt)
    np.testing.assert_allclose(rma.numpy(), rmt.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(rva.numpy(), rvt.numpy(), rtol=1e-5, atol=1e-6)
