"""Swin-T: torchvision's layout, counts and init; shifted window attention against a reference."""

import math

import numpy as np
import pytest
from opcheck import check_grad, check_meta, randn
from vision_checks import (ClassifierTests, assert_constant, assert_normal_std, conv_linear_macs, meta_forward,
                           meta_model)

import flopcount.runtime as rt
from flopcount.models.swin import ShiftedWindowAttention, relative_position_index, shifted_window_attention


def matmul_macs(events) -> int:
    return sum(e.cost.macs for e in events if e.op.name == "matmul")


class TestSwin(ClassifierTests):
    PUBLISHED_PARAMS = {"swin_t": 28_288_354}
    # torchvision's figure counts the two attention contractions besides conv and linear
    PUBLISHED_GMACS = {"swin_t": 4.491}

    def test_meta_forward_shape_and_macs(self, name):
        out, events = meta_forward(meta_model(name), name)
        assert out.shape == (1, 1000) and out.dtype == rt.float32
        assert abs((conv_linear_macs(events) + matmul_macs(events)) / 1e9 - self.PUBLISHED_GMACS[name]) < 5e-4

    def test_torchvision_init(self, name, eager):
        model, _ = eager
        block = model.features[7][1]
        for linear in (block.attn.qkv, block.attn.proj, block.mlp[0], block.mlp[3], model.head):
            # the model-wide truncated-normal init runs last, so it also replaces the MLP's Xavier init
            assert_normal_std(linear.weight, 0.02)
            assert_constant(linear.bias, 0)
        assert_normal_std(model.features[6].reduction.weight, 0.02)
        assert_normal_std(block.attn.relative_position_bias_table, 0.02)
        assert_constant(model.norm.weight, 1)


def test_attention_contractions_and_shift_masks_are_counted():
    model = meta_model("swin_t")
    _, events = meta_forward(model, "swin_t")
    # per block: windows of 49 tokens cover the H x W map; QK^T and PV each cost H*W*49*C
    stages = ((56, 96, 2), (28, 192, 2), (14, 384, 6), (7, 768, 2))
    assert matmul_macs(events) == sum(depth * side * side * 49 * 2 * dim for side, dim, depth in stages)
    # bias add in every block, mask add in the shifted ones (none in stage 4: one window covers 7x7)
    adds = [e for e in events if e.op.name == "add" and isinstance(e.module, ShiftedWindowAttention)]
    assert len(adds) == 12 + (1 + 1 + 3 + 0)


def test_relative_position_index_of_a_2x2_window():
    # positions (0,0) (0,1) (1,0) (1,1); offset (dh, dw) -> (dh + 1) * 3 + (dw + 1)
    expected = np.array([[4, 3, 1, 0],
                         [5, 4, 2, 1],
                         [7, 6, 4, 3],
                         [8, 7, 5, 4]])
    np.testing.assert_array_equal(relative_position_index([2, 2]).reshape(4, 4), expected)


def reference_window_attention(x, w_qkv, b_qkv, w_proj, b_proj, bias, window, shift, heads):
    """Loop over windows and heads: attention among tokens of one window and one pre-roll region."""
    b, h, w, c = x.shape
    wh, ww = window
    ph, pw = -(-h // wh) * wh, -(-w // ww) * ww
    padded = np.zeros((b, ph, pw, c), x.dtype)
    padded[:, :h, :w] = x
    sh = 0 if wh >= ph else shift[0]
    sw = 0 if ww >= pw else shift[1]
    rolled = np.roll(padded, (-sh, -sw), axis=(1, 2))

    def groups(n, win, s):  # which of the three strips a rolled row/column came from
        i = np.arange(n)
        return np.zeros(n, int) if s == 0 else np.where(i < n - win, 0, np.where(i < n - s, 1, 2))

    region = groups(ph, wh, sh)[:, None] * 3 + groups(pw, ww, sw)[None, :]
    d = c // heads
    out = np.zeros_like(rolled)
    for n in range(b):
        for i in range(0, ph, wh):
            for j in range(0, pw, ww):
                tokens = rolled[n, i:i + wh, j:j + ww].reshape(-1, c)
                labels = region[i:i + wh, j:j + ww].reshape(-1)
                q, k, v = np.split(tokens @ w_qkv.T + b_qkv, 3, axis=1)
                heads_out = []
                for hd in range(heads):
                    cols = slice(hd * d, (hd + 1) * d)
                    scores = (q[:, cols] * d ** -0.5) @ k[:, cols].T + bias[hd]
                    scores[labels[:, None] != labels[None, :]] = -np.inf
                    p = np.exp(scores - scores.max(axis=1, keepdims=True))
                    heads_out.append((p / p.sum(axis=1, keepdims=True)) @ v[:, cols])
                out[n, i:i + wh, j:j + ww] = (np.concatenate(heads_out, 1) @ w_proj.T + b_proj).reshape(wh, ww, c)
    return np.roll(out, (sh, sw), axis=(1, 2))[:, :h, :w]


@pytest.mark.parametrize("size, window, shift", [
    ((8, 8), (4, 4), (0, 0)),    # plain windows
    ((8, 8), (4, 4), (2, 2)),    # shifted: masks between rolled-in regions
    ((9, 6), (4, 4), (2, 2)),    # padded to 12 x 8 before shifting
    ((5, 5), (7, 7), (3, 3)),    # window larger than the map: no shift
])
def test_shifted_window_attention_matches_reference(size, window, shift):
    rng = np.random.default_rng(1)
    c, heads = 8, 2
    n = window[0] * window[1]
    x = rng.standard_normal((2, *size, c)).astype(np.float32)
    w_qkv, b_qkv = rng.standard_normal((3 * c, c)).astype(np.float32) * 0.3, rng.standard_normal(3 * c).astype(np.float32)
    w_proj, b_proj = rng.standard_normal((c, c)).astype(np.float32) * 0.3, rng.standard_normal(c).astype(np.float32)
    bias = rng.standard_normal((heads, n, n)).astype(np.float32)
    got = shifted_window_attention(rt.tensor(x), rt.tensor(w_qkv), rt.tensor(w_proj), rt.tensor(bias[None]),
                                   list(window), heads, list(shift), qkv_bias=rt.tensor(b_qkv),
                                   proj_bias=rt.tensor(b_proj), training=False)
    expected = reference_window_attention(x, w_qkv, b_qkv, w_proj, b_proj, bias, window, shift, heads)
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-4, atol=1e-5)


def test_shifted_window_attention_gradients_and_meta_shapes():
    # padded (3x5 -> 4x6) and shifted, so the gradient flows back through roll, mask, pad and crop
    def attend(x, w_qkv, w_proj, bias, b_qkv, b_proj):
        return shifted_window_attention(x, w_qkv, w_proj, bias, [2, 2], 2, [1, 1], qkv_bias=b_qkv,
                                        proj_bias=b_proj, training=False)

    arrays = [randn(1, 3, 5, 4, seed=1), randn(12, 4, seed=2), randn(4, 4, seed=3), randn(1, 2, 4, 4, seed=4),
              randn(12, seed=5), randn(4, seed=6)]
    check_grad(attend, arrays)
    check_meta(attend, [a.astype(np.float32) for a in arrays])


def test_shifted_window_attention_matches_torchvision_function():
    torch = pytest.importorskip("torch")
    swin = pytest.importorskip("torchvision.models.swin_transformer")
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 11, 9, 12)).astype(np.float32)
    layer = ShiftedWindowAttention(12, [4, 4], [2, 2], num_heads=3).eval()
    bias = layer.get_relative_position_bias()
    with rt.no_grad():
        got = layer(rt.tensor(x)).numpy()
    expected = swin.shifted_window_attention(
        torch.from_numpy(x), torch.from_numpy(layer.qkv.weight.numpy()), torch.from_numpy(layer.proj.weight.numpy()),
        torch.from_numpy(bias.numpy()), [4, 4], 3, shift_size=[2, 2],
        qkv_bias=torch.from_numpy(layer.qkv.bias.numpy()), proj_bias=torch.from_numpy(layer.proj.bias.numpy()),
        training=False).numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_patch_merging_concatenates_2x2_neighbourhoods():
    layer = meta_model("swin_t").features[2]
    x = rt.empty(1, 55, 55, 96, device="meta")  # odd sizes are padded to 56
    assert layer(x).shape == (1, 28, 28, 192)


def test_relative_position_bias_reads_the_table():
    layer = ShiftedWindowAttention(4, [2, 2], [0, 0], num_heads=2)
    table = layer.relative_position_bias_table.numpy()
    bias = layer.get_relative_position_bias().numpy()
    index = relative_position_index([2, 2]).reshape(4, 4)
    assert bias.shape == (1, 2, 4, 4)
    np.testing.assert_array_equal(bias[0, 1], table[index, 1])
    assert math.isclose(float(bias[0, 0, 2, 1]), float(table[6, 0]))
