"""Swin Transformer (Liu et al., 2021), module for module as torchvision builds it.

Self-attention runs inside local windows; every other block shifts the windows by half a window
(a cyclic ``roll``) and masks the attention between regions that the roll made neighbours. Both
attention contractions are runtime ``matmul`` ops, so the counters see them.

    net = flopcount.models.get("swin_t")
"""

from __future__ import annotations

from functools import lru_cache, partial
from typing import Sequence

import numpy as np

import flopcount.runtime as rt
from flopcount.runtime import nn

from ._blocks import MLP, Permute, StochasticDepth
from ._registry import image_input, register_model

F = nn.functional

__all__ = ["SwinTransformer", "SwinTransformerBlock", "ShiftedWindowAttention", "PatchMerging",
           "shifted_window_attention", "swin_transformer"]


def _patch_merging_pad(x):
    """(..., H, W, C) -> (..., H/2, W/2, 4C): each 2x2 neighbourhood concatenated (odd sizes padded)."""
    h, w = x.shape[-3], x.shape[-2]
    x = F.pad(x, (0, 0, 0, w % 2, 0, h % 2))
    x0 = x[..., 0::2, 0::2, :]
    x1 = x[..., 1::2, 0::2, :]
    x2 = x[..., 0::2, 1::2, :]
    x3 = x[..., 1::2, 1::2, :]
    return rt.cat([x0, x1, x2, x3], -1)


class PatchMerging(nn.Module):
    """Halve the resolution, double the channels: 2x2 concat, LayerNorm(4C), Linear(4C -> 2C)."""

    def __init__(self, dim: int, norm_layer=nn.LayerNorm):
        super().__init__()
        self.dim = dim
        self.reduction = nn.Linear(4 * dim, 2 * dim, bias=False)
        self.norm = norm_layer(4 * dim)

    def forward(self, x):
        return self.reduction(self.norm(_patch_merging_pad(x)))


def relative_position_index(window_size: Sequence[int]) -> np.ndarray:
    """For each pair of positions in a window, the row of their offset in the bias table.

    Offsets (dh, dw) in [-(Wh-1), Wh-1] x [-(Ww-1), Ww-1] map to (dh + Wh - 1) * (2Ww - 1) + dw + Ww - 1.
    """
    wh, ww = window_size
    coords = np.stack(np.meshgrid(np.arange(wh), np.arange(ww), indexing="ij")).reshape(2, -1)
    rel = (coords[:, :, None] - coords[:, None, :]).transpose(1, 2, 0)  # (N, N, 2)
    return ((rel[..., 0] + wh - 1) * (2 * ww - 1) + rel[..., 1] + ww - 1).reshape(-1).astype(np.int64)


@lru_cache(maxsize=32)
def _shift_mask(pad_h: int, pad_w: int, window: tuple, shift: tuple) -> np.ndarray:
    """Additive mask (num_windows, N, N): -100 between tokens from different pre-roll regions.

    After the cyclic shift, a window on the border holds pieces of up to four regions that were
    not adjacent in the image; tokens attend only within their own region.
    """
    region = np.zeros((pad_h, pad_w), dtype=np.float32)
    h_slices = ((0, -window[0]), (-window[0], -shift[0]), (-shift[0], None))
    w_slices = ((0, -window[1]), (-window[1], -shift[1]), (-shift[1], None))
    for count, (h, w) in enumerate((h, w) for h in h_slices for w in w_slices):
        region[h[0]:h[1], w[0]:w[1]] = count
    region = region.reshape(pad_h // window[0], window[0], pad_w // window[1], window[1])
    region = region.transpose(0, 2, 1, 3).reshape(-1, window[0] * window[1])
    diff = region[:, None, :] - region[:, :, None]
    return np.where(diff != 0, np.float32(-100.0), np.float32(0.0))


def shifted_window_attention(x, qkv_weight, proj_weight, relative_position_bias, window_size: Sequence[int],
                             num_heads: int, shift_size: Sequence[int], attention_dropout: float = 0.0,
                             dropout: float = 0.0, qkv_bias=None, proj_bias=None, training: bool = True):
    """Window multi-head self-attention with relative position bias on (B, H, W, C) input.

    Pads H and W to multiples of the window, rolls by ``-shift_size`` (when a shift applies),
    attends within each window (masking across rolled-in regions), and undoes roll and pad.

    >>> x = rt.randn(1, 7, 7, 8)
    >>> w_qkv, w_proj, bias = rt.randn(24, 8), rt.randn(8, 8), rt.zeros(1, 2, 49, 49)
    >>> shifted_window_attention(x, w_qkv, w_proj, bias, [7, 7], 2, [0, 0]).shape
    (1, 7, 7, 8)
    """
    b, h, w, c = x.shape
    wh, ww = window_size
    pad_r = (ww - w % ww) % ww
    pad_b = (wh - h % wh) % wh
    x = F.pad(x, (0, 0, 0, pad_r, 0, pad_b))
    _, pad_h, pad_w, _ = x.shape
    # a window as large as the feature map sees everything already: no shift
    shift = (0 if wh >= pad_h else shift_size[0], 0 if ww >= pad_w else shift_size[1])
    shifted = sum(shift) > 0
    if shifted:
        x = rt.roll(x, shifts=(-shift[0], -shift[1]), dims=(1, 2))

    # partition into windows: (B * nW, Wh * Ww, C)
    num_windows = (pad_h // wh) * (pad_w // ww)
    x = x.reshape(b, pad_h // wh, wh, pad_w // ww, ww, c)
    x = x.permute(0, 1, 3, 2, 4, 5).reshape(b * num_windows, wh * ww, c)
    n_tokens = wh * ww

    qkv = F.linear(x, qkv_weight, qkv_bias)
    qkv = qkv.reshape(b * num_windows, n_tokens, 3, num_heads, c // num_heads).permute(2, 0, 3, 1, 4)
    q, k, v = qkv[0], qkv[1], qkv[2]
    q = q * (c // num_heads) ** -0.5
    attn = q.matmul(k.transpose(-2, -1))
    attn = attn + relative_position_bias
    if shifted:
        mask = rt.tensor(_shift_mask(pad_h, pad_w, (wh, ww), shift), dtype=x.dtype, device=x.device)
        attn = attn.reshape(b, num_windows, num_heads, n_tokens, n_tokens)
        attn = attn + mask.unsqueeze(1).unsqueeze(0)
        attn = attn.reshape(-1, num_heads, n_tokens, n_tokens)
    attn = F.softmax(attn, dim=-1)
    attn = F.dropout(attn, p=attention_dropout, training=training)
    x = attn.matmul(v).transpose(1, 2).reshape(b * num_windows, n_tokens, c)
    x = F.linear(x, proj_weight, proj_bias)
    x = F.dropout(x, p=dropout, training=training)

    # merge windows back and undo the shift and the padding
    x = x.reshape(b, pad_h // wh, pad_w // ww, wh, ww, c)
    x = x.permute(0, 1, 3, 2, 4, 5).reshape(b, pad_h, pad_w, c)
    if shifted:
        x = rt.roll(x, shifts=(shift[0], shift[1]), dims=(1, 2))
    if pad_r or pad_b:
        x = x[:, :h, :w, :].contiguous()
    return x


class ShiftedWindowAttention(nn.Module):
    """Module form of :func:`shifted_window_attention` with its qkv/proj layers and bias table."""

    def __init__(self, dim: int, window_size: Sequence[int], shift_size: Sequence[int], num_heads: int,
                 qkv_bias: bool = True, proj_bias: bool = True, attention_dropout: float = 0.0,
                 dropout: float = 0.0):
        super().__init__()
        if len(window_size) != 2 or len(shift_size) != 2:
            raise ValueError(f"ShiftedWindowAttention: window_size {window_size} and shift_size {shift_size} "
                             f"must have length 2")
        self.window_size = list(window_size)
        self.shift_size = list(shift_size)
        self.num_heads = num_heads
        self.attention_dropout = attention_dropout
        self.dropout = dropout
        self.qkv = nn.Linear(dim, dim * 3, bias=qkv_bias)
        self.proj = nn.Linear(dim, dim, bias=proj_bias)
        table_rows = (2 * window_size[0] - 1) * (2 * window_size[1] - 1)
        self.relative_position_bias_table = nn.Parameter(rt.zeros(table_rows, num_heads))
        nn.init.trunc_normal_(self.relative_position_bias_table, std=0.02)
        self.register_buffer("relative_position_index", rt.tensor(relative_position_index(window_size)))

    def get_relative_position_bias(self):
        """(1, heads, N, N): the table rows of every position pair in a window."""
        n = self.window_size[0] * self.window_size[1]
        bias = self.relative_position_bias_table[self.relative_position_index]
        return bias.reshape(n, n, -1).permute(2, 0, 1).contiguous().unsqueeze(0)

    def forward(self, x):
        return shifted_window_attention(
            x, self.qkv.weight, self.proj.weight, self.get_relative_position_bias(), self.window_size,
            self.num_heads, shift_size=self.shift_size, attention_dropout=self.attention_dropout,
            dropout=self.dropout, qkv_bias=self.qkv.bias, proj_bias=self.proj.bias, training=self.training)


class SwinTransformerBlock(nn.Module):
    """x + attn(norm1(x)), then x + mlp(norm2(x)), each branch under stochastic depth."""

    def __init__(self, dim: int, num_heads: int, window_size: Sequence[int], shift_size: Sequence[int],
                 mlp_ratio: float = 4.0, dropout: float = 0.0, attention_dropout: float = 0.0,
                 stochastic_depth_prob: float = 0.0, norm_layer=nn.LayerNorm):
        super().__init__()
        self.norm1 = norm_layer(dim)
        self.attn = ShiftedWindowAttention(dim, window_size, shift_size, num_heads,
                                           attention_dropout=attention_dropout, dropout=dropout)
        self.stochastic_depth = StochasticDepth(stochastic_depth_prob, "row")
        self.norm2 = norm_layer(dim)
        self.mlp = MLP(dim, [int(dim * mlp_ratio), dim], activation_layer=nn.GELU, inplace=None, dropout=dropout)
        for m in self.mlp.modules():
            if isinstance(m, nn.Linear):
                nn.init.xavier_uniform_(m.weight)
                if m.bias is not None:
                    nn.init.normal_(m.bias, std=1e-6)

    def forward(self, x):
        x = x + self.stochastic_depth(self.attn(self.norm1(x)))
        return x + self.stochastic_depth(self.mlp(self.norm2(x)))


class SwinTransformer(nn.Module):
    """Swin Transformer with torchvision's module names (features, norm, permute, avgpool, head)."""

    def __init__(self, patch_size: Sequence[int], embed_dim: int, depths: Sequence[int],
                 num_heads: Sequence[int], window_size: Sequence[int], mlp_ratio: float = 4.0,
                 dropout: float = 0.0, attention_dropout: float = 0.0, stochastic_depth_prob: float = 0.1,
                 num_classes: int = 1000, norm_layer=None):
        super().__init__()
        self.num_classes = num_classes
        norm_layer = norm_layer or partial(nn.LayerNorm, eps=1e-5)
        # patch embedding: non-overlapping patch_size convolution, channels last, LayerNorm
        layers = [nn.Sequential(nn.Conv2d(3, embed_dim, kernel_size=tuple(patch_size), stride=tuple(patch_size)),
                                Permute([0, 2, 3, 1]), norm_layer(embed_dim))]
        total_blocks = sum(depths)
        block_id = 0
        for i_stage, depth in enumerate(depths):
            dim = embed_dim * 2 ** i_stage
            stage = []
            for i_layer in range(depth):
                # the drop probability grows linearly from 0 to stochastic_depth_prob
                sd_prob = stochastic_depth_prob * float(block_id) / (total_blocks - 1)
                shift = [0 if i_layer % 2 == 0 else w // 2 for w in window_size]
                stage.append(SwinTransformerBlock(dim, num_heads[i_stage], window_size, shift, mlp_ratio,
                                                  dropout, attention_dropout, sd_prob, norm_layer))
                block_id += 1
            layers.append(nn.Sequential(*stage))
            if i_stage < len(depths) - 1:
                layers.append(PatchMerging(dim, norm_layer))
        self.features = nn.Sequential(*layers)
        num_features = embed_dim * 2 ** (len(depths) - 1)
        self.norm = norm_layer(num_features)
        self.permute = Permute([0, 3, 1, 2])  # (B, H, W, C) -> (B, C, H, W)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten(1)
        self.head = nn.Linear(num_features, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.trunc_normal_(m.weight, std=0.02)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)

    def forward(self, x):
        x = self.norm(self.features(x))
        x = self.avgpool(self.permute(x))
        return self.head(self.flatten(x))


def swin_transformer(patch_size, embed_dim: int, depths, num_heads, window_size,
                     stochastic_depth_prob: float, **kwargs) -> SwinTransformer:
    """A Swin Transformer of the given size (torchvision's ``swin_*`` constructors)."""
    return SwinTransformer(patch_size, embed_dim, depths, num_heads, window_size,
                           stochastic_depth_prob=stochastic_depth_prob, **kwargs)


register_model("swin_t", family="swin", inputs=image_input(), params=28_288_354,
               description="Swin-T (torchvision)",
               patch_size=(4, 4), embed_dim=96, depths=(2, 2, 6, 2), num_heads=(3, 6, 12, 24),
               window_size=(7, 7), stochastic_depth_prob=0.2)(swin_transformer)
