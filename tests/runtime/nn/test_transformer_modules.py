"""MultiheadAttention and the Transformer layers: torch state dicts load with strict=True, forward
and backward equal torch on the same weights (masks, padding, causal, batch_first, norm_first,
kdim/vdim), the fused attention op is used when weights are not needed, and MACs add up."""

import numpy as np
import pytest

import flopcount.runtime as rt
from opcheck import op_costs, randn, record

nn = rt.nn
E, H, L, S, N = 8, 2, 3, 5, 2


def _load_from_torch(ours, theirs):
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()}, strict=True)


def test_mha_parameter_names_and_shapes():
    packed = nn.MultiheadAttention(E, H)
    assert [(k, v.shape) for k, v in packed.state_dict().items()] == [
        ("in_proj_weight", (3 * E, E)), ("in_proj_bias", (3 * E,)), ("out_proj.weight", (E, E)),
        ("out_proj.bias", (E,))]
    split = nn.MultiheadAttention(E, H, kdim=4, vdim=6, bias=False)
    assert [(k, v.shape) for k, v in split.state_dict().items()] == [
        ("q_proj_weight", (E, E)), ("k_proj_weight", (E, 4)), ("v_proj_weight", (E, 6)), ("out_proj.weight", (E, E))]
    assert type(packed.out_proj).__name__ == "NonDynamicallyQuantizableLinear"
    assert isinstance(packed.out_proj, nn.Linear)
    np.testing.assert_array_equal(packed.in_proj_bias.numpy(), 0)
    np.testing.assert_array_equal(packed.out_proj.bias.numpy(), 0)


MHA_CASES = {
    "self": ({}, {}),
    "batch_first": ({"batch_first": True}, {}),
    "cross kdim vdim": ({"kdim": 4, "vdim": 6}, {"cross": True}),
    "cross same dims": ({}, {"cross": True}),
    "no bias, no weights": ({"bias": False}, {"need_weights": False}),
    "per-head weights": ({}, {"average_attn_weights": False}),
    "bool mask": ({}, {"mask": "bool"}),
    "float 3-d mask, fused": ({}, {"mask": "float3", "need_weights": False}),
    "padding, fused": ({"batch_first": True}, {"padding": True, "need_weights": False}),
    "padding and mask": ({}, {"padding": True, "mask": "bool"}),
    "causal, fused": ({}, {"causal": True, "need_weights": False}),
    "causal with weights": ({}, {"causal": True}),
    "unbatched": ({}, {"unbatched": True}),
}


@pytest.mark.parametrize("case", sorted(MHA_CASES))
def test_mha_matches_torch(case):
    torch = pytest.importorskip("torch")
    kwargs, call = MHA_CASES[case]
    theirs = torch.nn.MultiheadAttention(E, H, **kwargs)
    ours = nn.MultiheadAttention(E, H, **kwargs)
    _load_from_torch(ours, theirs)
    rng = np.random.default_rng(0)
    bf = kwargs.get("batch_first", False)

    def shape(length, dim):
        return (length, dim) if call.get("unbatched") else ((N, length, dim) if bf else (length, N, dim))

    q = rng.standard_normal(shape(L, E)).astype(np.float32)
    qa, qt = rt.tensor(q, requires_grad=True), torch.tensor(q, requires_grad=True)
    src = S if call.get("cross") else L
    if call.get("cross"):
        k = rng.standard_normal(shape(S, kwargs.get("kdim", E))).astype(np.float32)
        v = rng.standard_normal(shape(S, kwargs.get("vdim", E))).astype(np.float32)
        ka, va, kt, vt = rt.tensor(k), rt.tensor(v), torch.tensor(k), torch.tensor(v)
    else:
        ka = va = qa
        kt = vt = qt
    extra_a, extra_t = {}, {}

    def both(name, value):
        extra_a[name] = rt.tensor(value) if isinstance(value, np.ndarray) else value
        extra_t[name] = torch.tensor(value) if isinstance(value, np.ndarray) else value

    if call.get("mask") == "bool":
        m = rng.random((L, src)) > 0.6
        m[:, 0] = False
        both("attn_mask", m)
    if call.get("mask") == "float3":
        both("attn_mask", rng.standard_normal((N * H, L, src)).astype(np.float32))
    if call.get("padding"):
        pad = np.zeros((N, src), bool)
        pad[1, -1] = True
        both("key_padding_mask", pad)
    if call.get("causal"):
        both("attn_mask", np.triu(np.ones((L, L), bool), 1))
        both("is_causal", True)
    for name in ("need_weights", "average_attn_weights"):
        if name in call:
            both(name, call[name])
    (ya, wa), (yt, wt) = ours(qa, ka, va, **extra_a), theirs(qt, kt, vt, **extra_t)
    g = rng.standard_normal(ya.shape).astype(np.float32)
    (ya * rt.tensor(g)).sum().backward()
    (yt * torch.tensor(g)).sum().backward()
    np.testing.assert_allclose(ya.numpy(), yt.detach().numpy(), rtol=1e-5, atol=1e-5)
    assert (wa is None) == (wt is None)
    if wa is not None:
        np.testing.assert_allclose(wa.numpy(), wt.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(qa.grad.numpy(), qt.grad.numpy(), rtol=1e-4, atol=1e-5)
    for (n, pa), (_, pt) in zip(ours.named_parameters(), theirs.named_parameters()):
        np.testing.assert_allclose(pa.grad.numpy(), pt.grad.numpy(), rtol=1e-4, atol=1e-5, err_msg=n)


def test_mha_uses_the_fused_op_only_when_weights_are_not_needed():
    mha = nn.MultiheadAttention(E, H, batch_first=True)
    x = rt.randn(N, L, E)
    fused = op_costs(lambda: mha(x, x, x, need_weights=False))
    explicit = op_costs(lambda: mha(x, x, x))
    assert "scaled_dot_product_attention" in fused and "matmul" not in fused
    assert "scaled_dot_product_attention" not in explicit and "softmax" in explicit
    # the same contractions either way: N·H·L·L·(hd + hd) MACs
    assert fused["scaled_dot_product_attention"].macs == explicit["matmul"].macs == N * H * L * L * (E // H) * 2
    # the projections: one packed linear (3E outputs) and the output projection
    assert fused["linear"].macs == N * L * E * 3 * E + N * L * E * E


def test_encoder_layer_state_dict_and_macs():
    layer = nn.TransformerEncoderLayer(E, H, dim_feedforward=16, batch_first=True).eval()
    assert [k for k in layer.state_dict()] == [
        "self_attn.in_proj_weight", "self_attn.in_proj_bias", "self_attn.out_proj.weight", "self_attn.out_proj.bias",
        "linear1.weight", "linear1.bias", "linear2.weight", "linear2.bias", "norm1.weight", "norm1.bias",
        "norm2.weight", "norm2.bias"]
    x = rt.randn(N, L, E)
    costs = op_costs(lambda: layer(x))
    total = sum(c.macs for c in costs.values())
    projections = N * L * (3 * E * E + E * E)
    attention = N * H * L * L * (E // H) * 2
    feed_forward = N * L * (E * 16 + 16 * E)
    assert total == projections + attention + feed_forward


LAYER_CASES = [{}, {"norm_first": True}, {"activation": "gelu", "batch_first": True}, {"bias": False},
               {"layer_norm_eps": 1e-3, "norm_first": True, "batch_first": True}]


@pytest.mark.parametrize("kwargs", LAYER_CASES, ids=[str(sorted(k)) for k in LAYER_CASES])
def test_encoder_and_decoder_stacks_match_torch(kwargs):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    enc_t = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(E, H, 16, 0.0, **kwargs), 2,
                                        norm=torch.nn.LayerNorm(E), enable_nested_tensor=False)
    enc_a = nn.TransformerEncoder(nn.TransformerEncoderLayer(E, H, 16, 0.0, **kwargs), 2, norm=nn.LayerNorm(E))
    dec_t = torch.nn.TransformerDecoder(torch.nn.TransformerDecoderLayer(E, H, 16, 0.0, **kwargs), 2,
                                        norm=torch.nn.LayerNorm(E))
    dec_a = nn.TransformerDecoder(nn.TransformerDecoderLayer(E, H, 16, 0.0, **kwargs), 2, norm=nn.LayerNorm(E))
    _load_from_torch(enc_a, enc_t)
    _load_from_torch(dec_a, dec_t)
    bf = kwargs.get("batch_first", False)
    src = rng.standard_normal((N, S, E) if bf else (S, N, E)).astype(np.float32)
    tgt = rng.standard_normal((N, L, E) if bf else (L, N, E)).astype(np.float32)
    causal = torch.nn.Transformer.generate_square_subsequent_mask(L)
    pad = np.zeros((N, S), bool)
    pad[0, -2:] = True
    sa, st_ = rt.tensor(src, requires_grad=True), torch.tensor(src, requires_grad=True)
    ta, tt = rt.tensor(tgt, requires_grad=True), torch.tensor(tgt, requires_grad=True)
    mem_a = enc_a(sa, src_key_padding_mask=rt.tensor(pad))
    mem_t = enc_t(st_, src_key_padding_mask=torch.tensor(pad))
    ya = dec_a(ta, mem_a, tgt_mask=rt.tensor(causal.numpy()), memory_key_padding_mask=rt.tensor(pad))
    yt = dec_t(tt, mem_t, tgt_mask=causal, memory_key_padding_mask=torch.tensor(pad))
    g = rng.standard_normal(ya.shape).astype(np.float32)
    (ya * rt.tensor(g)).sum().backward()
    (yt * torch.tensor(g)).sum().backward()
    np.testing.assert_allclose(ya.numpy(), yt.detach().numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(sa.grad.numpy(), st_.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ta.grad.numpy(), tt.grad.numpy(), rtol=1e-4, atol=1e-5)
    for (n, pa), (_, pt) in zip(dec_a.named_parameters(), dec_t.named_parameters()):
        np.testing.assert_allclose(pa.grad.numpy(), pt.grad.numpy(), rtol=1e-4, atol=1e-5, err_msg=n)


@pytest.mark.parametrize("cls", ["TransformerEncoderLayer", "TransformerDecoderLayer"])
def test_a_module_activation_is_used(cls):
    # one layer only: torch's deep copies (inside its stacks) silently replace a module
    # activation by relu, which we do not reproduce
    torch = pytest.importorskip("torch")
    theirs = getattr(torch.nn, cls)(E, H, 16, 0.0, activation=torch.nn.GELU())
    ours = getattr(nn, cls)(E, H, 16, 0.0, activation=nn.GELU())
    _load_from_torch(ours, theirs)
    x = randn(L, N, E, seed=3).astype(np.float32)
    args_a, args_t = (rt.tensor(x),), (torch.tensor(x),)
    if cls == "TransformerDecoderLayer":
        m = randn(S, N, E, seed=4).astype(np.float32)
        args_a, args_t = args_a + (rt.tensor(m),), args_t + (torch.tensor(m),)
    np.testing.assert_allclose(ours(*args_a).numpy(), theirs(*args_t).detach().numpy(), rtol=1e-5, atol=1e-5)
    assert "gelu" in op_costs(lambda: ours(*args_a))


def test_a_causal_float_mask_is_detected_and_runs_the_fused_causal_op():
    enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(E, H, 16), 2).eval()
    mask = nn.Transformer.generate_square_subsequent_mask(L)
    _, events = record(lambda: enc(rt.randn(L, N, E), mask=mask))
    attention = [e for e in events if e.op.name == "scaled_dot_product_attention"]
    assert len(attention) == 2 and all(e.attrs["is_causal"] for e in attention)
    assert all(e.inputs[3] is None for e in attention)  # the mask itself is not needed


def test_clones_are_independent_copies_with_equal_initial_weights():
    enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(E, H, 16), 3)
    w = [layer.linear1.weight for layer in enc.layers]
    assert w[0] is not w[1] and w[0].data is not w[1].data
    np.testing.assert_array_equal(w[0].numpy(), w[2].numpy())
    assert len(list(enc.parameters())) == 3 * 12


def test_transformer_matches_torch():
    torch = pytest.importorskip("torch")
    theirs = torch.nn.Transformer(E, H, 2, 1, 16, 0.0, batch_first=True)
    ours = nn.Transformer(E, H, 2, 1, 16, 0.0, batch_first=True)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    _load_from_torch(ours, theirs)
    rng = np.random.default_rng(2)
    src, tgt = rng.standard_normal((N, S, E)).astype(np.float32), rng.standard_normal((N, L, E)).astype(np.float32)
    mask = torch.nn.Transformer.generate_square_subsequent_mask(L)
    out = ours(rt.tensor(src), rt.tensor(tgt), tgt_mask=rt.tensor(mask.numpy()))
    ref = theirs(torch.tensor(src), torch.tensor(tgt), tgt_mask=mask)
    np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), rtol=1e-4, atol=1e-5)


def test_dropout_is_active_in_training_only():
    layer = nn.TransformerEncoderLayer(E, H, 16, dropout=0.5, batch_first=True)
    x = rt.randn(N, L, E, requires_grad=True)
    rt.manual_seed(1)
    a = layer(x)
    b = layer(x)
    assert not np.allclose(a.numpy(), b.numpy())
    a.sum().backward()
    assert x.grad is not None and np.isfinite(x.grad.numpy()).all()
    layer.eval()
    np.testing.assert_array_equal(layer(x).numpy(), layer(x).numpy())
    assert "dropout" not in op_costs(lambda: layer(x))


def test_errors():
    with pytest.raises(ValueError, match=r"embed_dim \(10\) must be divisible by num_heads \(3\)"):
        nn.MultiheadAttention(10, 3)
    with pytest.raises(NotImplementedError, match="add_bias_kv"):
        nn.MultiheadAttention(8, 2, add_bias_kv=True)
    mha = nn.MultiheadAttention(E, H)
    x = rt.randn(L, N, E)
    with pytest.raises(rt.ShapeError, match=r"the 2-d attn_mask is \(2, 2\), expected \(3, 3\)"):
        mha(x, x, x, attn_mask=rt.ones(2, 2, dtype=rt.bool))
    with pytest.raises(rt.ShapeError, match=r"key_padding_mask \(3, 3\) should be \(2, 3\)"):
        mha(x, x, x, key_padding_mask=rt.ones(3, 3, dtype=rt.bool))
    with pytest.raises(rt.ShapeError, match="expected an embedding of size 8"):
        mha(rt.randn(L, N, 4), x, x)
    with pytest.raises(RuntimeError, match="activation should be relu/gelu, not tanh"):
        nn.TransformerEncoderLayer(E, H, activation="tanh")


def test_meta_model_counts_the_same_as_eager():
    # the meta mask carries its small constant value, so the causal mask is detected on both
    eager = nn.Transformer(16, 2, 1, 1, 32, batch_first=True).eval()
    with rt.meta():
        meta = nn.Transformer(16, 2, 1, 1, 32, batch_first=True).eval()
    src, tgt = rt.randn(2, 7, 16), rt.randn(2, 5, 16)
    mask = nn.Transformer.generate_square_subsequent_mask
    a = op_costs(lambda: eager(src, tgt, tgt_mask=mask(5)))
    b = op_costs(lambda: meta(src.to("meta"), tgt.to("meta"), tgt_mask=mask(5, device="meta")))
    assert a == b
