"""scaled_dot_product_attention: values and gradients (numpy reference, finite differences,
torch), masks, causal, GQA, dropout, COUNTING.md costs, and errors."""

import math

import numpy as np
import pytest

import flopcount.runtime as rt
from flopcount.runtime.ops.attention import ScaledDotProductAttentionBackward
from opcheck import Example, check_grad, check_op, op_costs, randn, record, run_example

F = rt.nn.functional
B, H, LQ, LK, D, DV = 2, 3, 4, 5, 6, 7
Q, K, V = randn(B, H, LQ, D, seed=1), randn(B, H, LK, D, seed=2), randn(B, H, LK, DV, seed=3)
SCORES = B * H * LQ * LK
MACS = SCORES * (D + DV)


def _softmax(s):
    e = np.exp(s - s.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _reference(q, k, v, mask=None, causal=False, scale=None):
    """The textbook formula in numpy (bool mask: True takes part)."""
    s = q @ np.swapaxes(k, -1, -2) * (1 / math.sqrt(q.shape[-1]) if scale is None else scale)
    if causal:
        s = np.where(np.tril(np.ones(s.shape[-2:], bool)), s, -np.inf)
    if mask is not None:
        s = np.where(mask, s, -np.inf) if mask.dtype == bool else s + mask
    return _softmax(s) @ v


def _reference_grads(g, q, k, v):
    """dq, dk, dv of attention without mask, derived by hand: P = softmax(S), S = q kᵀ / √D."""
    scale = 1 / math.sqrt(q.shape[-1])
    p = _softmax(q @ np.swapaxes(k, -1, -2) * scale)
    dv = np.swapaxes(p, -1, -2) @ g
    dp = g @ np.swapaxes(v, -1, -2)
    ds = p * (dp - (dp * p).sum(-1, keepdims=True))
    return ds @ k * scale, np.swapaxes(ds, -1, -2) @ q * scale, dv


def _backward(g, q, k, v):
    return rt.apply(ScaledDotProductAttentionBackward, g, q, k, v, None, None, dropout_p=0.0, is_causal=False,
                    scale=None, enable_gqa=False, mask_grad=False)


EXAMPLES = {
    # MACs B·H·Lq·Lk·(D + Dv); FLOPs 2·MACs + scale (n) + softmax (5n)
    "scaled_dot_product_attention": Example(F.scaled_dot_product_attention, [Q, K, V], _reference,
                                            macs=MACS, flops=2 * MACS + 6 * SCORES),
    # 2x the forward MACs; FLOPs 2·MACs + softmax gradient (4n) + scale (n)
    "scaled_dot_product_attention_backward": Example(
        _backward, [randn(B, H, LQ, DV, seed=4), Q, K, V], _reference_grads, grad=False,
        macs=2 * MACS, flops=4 * MACS + 5 * SCORES),
}


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example(name):
    run_example(name, EXAMPLES[name])


def test_backward_through_autograd_is_one_op_with_twice_the_macs():
    q, k, v = (rt.tensor(a.astype(np.float32), requires_grad=True) for a in (Q, K, V))
    _, events = record(lambda: F.scaled_dot_product_attention(q, k, v).sum().backward())
    names = [e.op.name for e in events if e.phase == "backward"]
    assert names.count("scaled_dot_product_attention_backward") == 1
    backward_macs = sum(e.cost.macs for e in events if e.phase == "backward")
    assert backward_macs == 2 * MACS


@pytest.mark.parametrize("mask_shape", [(LQ, LK), (B, 1, LQ, LK), (1, H, 1, LK)])
def test_bool_mask_broadcasts(mask_shape):
    mask = np.random.default_rng(5).random(mask_shape) > 0.3
    mask[..., 0] = True  # no row masked entirely
    check_op(F.scaled_dot_product_attention, [Q, K, V, mask], _reference)


def test_float_mask_is_added_and_gets_a_gradient():
    mask = randn(H, LQ, LK, seed=6)
    check_op(F.scaled_dot_product_attention, [Q, K, V, mask], lambda q, k, v, m: _reference(q, k, v, m))


def test_mask_and_causal_each_cost_one_flop_per_score():
    q, k, v = (rt.tensor(a.astype(np.float32)) for a in (Q, K, V))
    plain = op_costs(lambda: F.scaled_dot_product_attention(q, k, v))["scaled_dot_product_attention"]
    causal = op_costs(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))["scaled_dot_product_attention"]
    masked = op_costs(lambda: F.scaled_dot_product_attention(q, k, v, rt.ones(LQ, LK, dtype=rt.bool)))
    assert causal.macs == plain.macs == MACS  # causal: the same MACs by default
    assert causal.flops == plain.flops + SCORES
    assert masked["scaled_dot_product_attention"].flops == plain.flops + SCORES


def test_causal_is_top_left_aligned():
    check_op(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), [Q, K, V],
             lambda q, k, v: _reference(q, k, v, causal=True))


def test_causal_half_convention_halves_the_macs_forward_and_backward():
    from flopcount.conventions import FlopcountConvention

    half = FlopcountConvention(causal="half")
    q, k, v = (rt.tensor(a.astype(np.float32), requires_grad=True) for a in (Q, K, V))
    _, events = record(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True).sum().backward())
    fwd = [e for e in events if e.op.name == "scaled_dot_product_attention"][0]
    bwd = [e for e in events if e.op.name == "scaled_dot_product_attention_backward"][0]
    fwd_half = half.op_cost(fwd.op, fwd.outputs[0], fwd.inputs, fwd.attrs)
    bwd_half = half.op_cost(bwd.op, tuple(bwd.outputs), bwd.inputs, bwd.attrs)
    assert fwd.cost.macs == MACS and bwd.cost.macs == 2 * MACS   # the op counts the full score matrix
    assert fwd_half.macs == MACS // 2 and bwd_half.macs == MACS
    assert fwd.cost.flops - fwd_half.flops == 2 * (MACS - MACS // 2)  # 2 FLOPs per MAC left out
    not_causal = dict(fwd.attrs, is_causal=False)
    assert half.op_cost(fwd.op, fwd.outputs[0], fwd.inputs, not_causal).macs == MACS  # all of it
    with pytest.raises(ValueError, match="causal must be one of"):
        FlopcountConvention(causal="quarter")


def test_grouped_query_attention_repeats_kv_heads():
    q = randn(B, 6, LQ, D, seed=7)
    k, v = randn(B, 2, LK, D, seed=8), randn(B, 2, LK, DV, seed=9)

    def ref(q, k, v):  # query head h uses key/value head h // 3
        return _reference(q, np.repeat(k, 3, axis=1), np.repeat(v, 3, axis=1))

    check_op(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, enable_gqa=True), [q, k, v], ref)
    costs = op_costs(lambda: F.scaled_dot_product_attention(*(rt.tensor(a) for a in (q, k, v)), enable_gqa=True))
    assert costs["scaled_dot_product_attention"].macs == B * 6 * LQ * LK * (D + DV)


def test_unbatched_and_broadcast_batch_and_custom_scale():
    check_op(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, scale=0.3), [Q[0, 0], K[0, 0], V[0, 0]],
             lambda q, k, v: _reference(q, k, v, scale=0.3))
    check_op(F.scaled_dot_product_attention, [Q, K[:1], V[:1]], _reference)


def test_fully_masked_rows_give_zeros_not_nan():
    mask = np.ones((LQ, LK), bool)
    mask[1] = False
    q, k, v = (rt.tensor(a, requires_grad=True) for a in (Q, K, V))
    out = F.scaled_dot_product_attention(q, k, v, rt.tensor(mask))
    assert np.all(out.numpy()[:, :, 1] == 0) and np.isfinite(out.numpy()).all()
    out.sum().backward()
    assert np.isfinite(q.grad.numpy()).all() and np.all(q.grad.numpy()[:, :, 1] == 0)


def test_dropout_mask_is_shared_by_forward_and_backward():
    p = 0.4

    def fn(q, k, v):
        rt.manual_seed(7)  # the same mask at every call, so finite differences see one function
        return F.scaled_dot_product_attention(q, k, v, dropout_p=p)

    check_grad(fn, [Q, K, V])
    rt.manual_seed(7)
    out, keep = rt.apply(rt.get_op("scaled_dot_product_attention"), *(rt.tensor(a) for a in (Q, K, V)), None,
                         dropout_p=p, is_causal=False, scale=None, enable_gqa=False)
    s = Q @ np.swapaxes(K, -1, -2) / math.sqrt(D)
    np.testing.assert_allclose(out.numpy(), (_softmax(s) * keep.numpy() / (1 - p)) @ V, rtol=1e-10)
    assert 0.4 < keep.numpy().mean() < 0.8  # about 1 − p of 120 kept


def test_dropout_costs_two_flops_per_score():
    q, k, v = (rt.tensor(a.astype(np.float32)) for a in (Q, K, V))
    plain = op_costs(lambda: F.scaled_dot_product_attention(q, k, v))["scaled_dot_product_attention"]
    dropped = op_costs(lambda: F.scaled_dot_product_attention(q, k, v, dropout_p=0.1))["scaled_dot_product_attention"]
    assert dropped.flops == plain.flops + 2 * SCORES
    assert rt.get_op("scaled_dot_product_attention").random


def test_meta_gives_shapes_and_costs_without_data():
    q, k, v = (rt.empty(8, 16, 128, 64, device="meta") for _ in range(3))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert out.shape == (8, 16, 128, 64) and out.data is None
    assert op_costs(lambda: F.scaled_dot_product_attention(q, k, v))["scaled_dot_product_attention"].macs == \
        8 * 16 * 128 * 128 * 128


def test_bad_inputs_name_the_op_and_shapes():
    q = rt.ones(1, 2, 3, 4)
    with pytest.raises(rt.ShapeError, match=r"scaled_dot_product_attention: query and key need the same "
                                            r"embedding size .*\(1, 2, 5, 3\)"):
        F.scaled_dot_product_attention(q, rt.ones(1, 2, 5, 3), rt.ones(1, 2, 5, 3))
    with pytest.raises(rt.ShapeError, match="key and value need the same batch dims and sequence length"):
        F.scaled_dot_product_attention(q, rt.ones(1, 2, 5, 4), rt.ones(1, 2, 6, 4))
    with pytest.raises(rt.ShapeError, match="attn_mask should not be set when is_causal"):
        F.scaled_dot_product_attention(q, q, q, rt.ones(3, 3, dtype=rt.bool), is_causal=True)
    with pytest.raises(rt.ShapeError, match=r"query heads \(3\) must be a multiple of the key/value heads \(2\)"):
        F.scaled_dot_product_attention(rt.ones(1, 3, 3, 4), q, q, enable_gqa=True)
    with pytest.raises(rt.ShapeError, match=r"scaled_dot_product_attention: shapes \(4, 4\) and \(1, 2, 3, 3\)"):
        F.scaled_dot_product_attention(q, q, q, rt.ones(4, 4, dtype=rt.bool))
    with pytest.raises(rt.ShapeError, match="attn_mask must be bool or floating"):
        F.scaled_dot_product_attention(q, q, q, rt.ones(3, 3, dtype=rt.int64))


# --- against torch, float32 ----------------------------------------------------------------------

TORCH_CASES = {
    "plain": ({}, None),
    "causal": ({"is_causal": True}, None),
    "bool mask": ({}, "bool"),
    "float mask": ({}, "float"),
    "gqa": ({"enable_gqa": True}, None),
    "scale": ({"scale": 0.2}, None),
}


@pytest.mark.parametrize("case", sorted(TORCH_CASES))
def test_matches_torch(case):
    torch = pytest.importorskip("torch")
    kwargs, mask_kind = TORCH_CASES[case]
    kv_heads = 1 if kwargs.get("enable_gqa") else H
    arrays = [randn(B, H, LQ, D, seed=11), randn(B, kv_heads, LK, D, seed=12), randn(B, kv_heads, LK, DV, seed=13)]
    arrays = [a.astype(np.float32) for a in arrays]
    ours = [rt.tensor(a, requires_grad=True) for a in arrays]
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
    mask_a = mask_t = None
    if mask_kind == "bool":
        m = np.random.default_rng(14).random((LQ, LK)) > 0.4
        mask_a, mask_t = rt.tensor(m), torch.tensor(m)
    elif mask_kind == "float":
        m = randn(B, 1, LQ, LK, seed=15).astype(np.float32)
        mask_a, mask_t = rt.tensor(m, requires_grad=True), torch.tensor(m, requires_grad=True)
        ours.append(mask_a)
        theirs.append(mask_t)
    ya = F.scaled_dot_product_attention(*ours[:3], mask_a, **kwargs)
    yt = torch.nn.functional.scaled_dot_product_attention(*theirs[:3], mask_t, **kwargs)
    g = randn(*ya.shape, seed=16).astype(np.float32)
    (ya * rt.tensor(g)).sum().backward()
    (yt * torch.tensor(g)).sum().backward()
    np.testing.assert_allclose(ya.numpy(), yt.detach().numpy(), rtol=1e-5, atol=1e-5)
    for a, t in zip(ours, theirs):
        np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), rtol=1e-4, atol=1e-5)
