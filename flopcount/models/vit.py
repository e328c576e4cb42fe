"""Vision Transformer (Dosovitskiy et al., 2021), module for module as torchvision builds it.

Attention runs through ``nn.MultiheadAttention`` (in_proj_weight / out_proj, as torchvision's
EncoderBlock), so the counters see the projections and both attention contractions.

    net = flopcount.models.get("vit_b_16")
"""

from __future__ import annotations

import math
from collections import OrderedDict
from functools import partial

import flopcount.runtime as rt
from flopcount.runtime import nn
from flopcount.runtime.errors import ShapeError

from ._blocks import MLP
from ._registry import image_input, register_model

__all__ = ["VisionTransformer", "EncoderBlock", "Encoder", "MLPBlock", "vision_transformer"]


class MLPBlock(MLP):
    """Transformer MLP: Linear, GELU, Dropout, Linear, Dropout (children 0-4)."""

    def __init__(self, in_dim: int, mlp_dim: int, dropout: float):
        super().__init__(in_dim, [mlp_dim, in_dim], activation_layer=nn.GELU, inplace=None, dropout=dropout)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.xavier_uniform_(m.weight)
                if m.bias is not None:
                    nn.init.normal_(m.bias, std=1e-6)


class EncoderBlock(nn.Module):
    """Pre-norm transformer layer: x + attn(ln_1(x)), then + mlp(ln_2(.))."""

    def __init__(self, num_heads: int, hidden_dim: int, mlp_dim: int, dropout: float, attention_dropout: float,
                 norm_layer=partial(nn.LayerNorm, eps=1e-6)):
        super().__init__()
        self.num_heads = num_heads
        self.ln_1 = norm_layer(hidden_dim)
        self.self_attention = nn.MultiheadAttention(hidden_dim, num_heads, dropout=attention_dropout,
                                                    batch_first=True)
        self.dropout = nn.Dropout(dropout)
        self.ln_2 = norm_layer(hidden_dim)
        self.mlp = MLPBlock(hidden_dim, mlp_dim, dropout)

    def forward(self, x):
        if x.ndim != 3:
            raise ShapeError(f"EncoderBlock: expected (batch, seq_length, hidden_dim), got {x.shape}")
        y = self.ln_1(x)
        y, _ = self.self_attention(y, y, y, need_weights=False)
        x = self.dropout(y) + x
        return x + self.mlp(self.ln_2(x))


class Encoder(nn.Module):
    """Learned position embedding, ``num_layers`` EncoderBlocks, final LayerNorm."""

    def __init__(self, seq_length: int, num_layers: int, num_heads: int, hidden_dim: int, mlp_dim: int,
                 dropout: float, attention_dropout: float, norm_layer=partial(nn.LayerNorm, eps=1e-6)):
        super().__init__()
        self.pos_embedding = nn.Parameter(rt.empty(1, seq_length, hidden_dim))
        nn.init.normal_(self.pos_embedding, std=0.02)  # from BERT
        self.dropout = nn.Dropout(dropout)
        layers = OrderedDict()
        for i in range(num_layers):
            layers[f"encoder_layer_{i}"] = EncoderBlock(num_heads, hidden_dim, mlp_dim, dropout,
                                                        attention_dropout, norm_layer)
        self.layers = nn.Sequential(layers)
        self.ln = norm_layer(hidden_dim)

    def forward(self, x):
        if x.ndim != 3:
            raise ShapeError(f"Encoder: expected (batch, seq_length, hidden_dim), got {x.shape}")
        x = x + self.pos_embedding
        return self.ln(self.layers(self.dropout(x)))


class VisionTransformer(nn.Module):
    """ViT with torchvision's module names (conv_proj, class_token, encoder, heads.head)."""

    def __init__(self, image_size: int, patch_size: int, num_layers: int, num_heads: int, hidden_dim: int,
                 mlp_dim: int, dropout: float = 0.0, attention_dropout: float = 0.0, num_classes: int = 1000,
                 representation_size: int | None = None, norm_layer=partial(nn.LayerNorm, eps=1e-6)):
        super().__init__()
        if image_size % patch_size:
            raise ShapeError(f"VisionTransformer: image_size {image_size} is not a multiple of "
                             f"patch_size {patch_size}")
        self.image_size = image_size
        self.patch_size = patch_size
        self.hidden_dim = hidden_dim
        self.mlp_dim = mlp_dim
        self.num_classes = num_classes
        self.representation_size = representation_size
        self.conv_proj = nn.Conv2d(3, hidden_dim, kernel_size=patch_size, stride=patch_size)
        self.class_token = nn.Parameter(rt.zeros(1, 1, hidden_dim))
        self.seq_length = (image_size // patch_size) ** 2 + 1
        self.encoder = Encoder(self.seq_length, num_layers, num_heads, hidden_dim, mlp_dim, dropout,
                               attention_dropout, norm_layer)
        heads = OrderedDict()
        if representation_size is None:
            heads["head"] = nn.Linear(hidden_dim, num_classes)
        else:
            heads["pre_logits"] = nn.Linear(hidden_dim, representation_size)
            heads["act"] = nn.Tanh()
            heads["head"] = nn.Linear(representation_size, num_classes)
        self.heads = nn.Sequential(heads)

        fan_in = self.conv_proj.in_channels * patch_size * patch_size
        nn.init.trunc_normal_(self.conv_proj.weight, std=math.sqrt(1 / fan_in))
        nn.init.zeros_(self.conv_proj.bias)
        if representation_size is not None:
            nn.init.trunc_normal_(self.heads.pre_logits.weight, std=math.sqrt(1 / hidden_dim))
            nn.init.zeros_(self.heads.pre_logits.bias)
        nn.init.zeros_(self.heads.head.weight)
        nn.init.zeros_(self.heads.head.bias)

    def _process_input(self, x):
        n, _, h, w = x.shape
        if h != self.image_size or w != self.image_size:
            raise ShapeError(f"VisionTransformer: expected {self.image_size}x{self.image_size} images, "
                             f"got input {x.shape}")
        p = self.patch_size
        x = self.conv_proj(x)                                  # (n, hidden, h/p, w/p)
        x = x.reshape(n, self.hidden_dim, (h // p) * (w // p))
        return x.permute(0, 2, 1)                              # (n, patches, hidden)

    def forward(self, x):
        x = self._process_input(x)
        n = x.shape[0]
        x = rt.cat([self.class_token.expand(n, -1, -1), x], dim=1)
        x = self.encoder(x)
        return self.heads(x[:, 0])


def vision_transformer(patch_size: int, num_layers: int, num_heads: int, hidden_dim: int, mlp_dim: int,
                       image_size: int = 224, **kwargs) -> VisionTransformer:
    """A ViT of the given size (torchvision's ``vit_*`` constructors)."""
    return VisionTransformer(image_size, patch_size, num_layers, num_heads, hidden_dim, mlp_dim, **kwargs)


register_model("vit_b_16", family="vit", inputs=image_input(), params=86_567_656,
               description="ViT-B/16 (torchvision)",
               patch_size=16, num_layers=12, num_heads=12, hidden_dim=768, mlp_dim=3072)(vision_transformer)
