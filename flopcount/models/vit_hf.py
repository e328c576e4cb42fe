"""Vision Transformer as Hugging Face transformers builds it: ``ViTModel`` and
``ViTForImageClassification`` (torchvision's ViT, with its own names, is ``vit.py``).

Patch embedding (a strided ``Conv2d``), a class token and learned positions, pre-norm layers
(``layernorm_before``, attention ``q_proj``/``k_proj``/``v_proj``/``o_proj``, ``layernorm_after``,
MLP ``fc1``/``fc2``), a final ``layernorm`` and, in ``ViTModel``, a tanh pooler. Names are
transformers 5's; checkpoints saved by transformers 4 (``encoder.layer.{i}.attention.attention.
query``...) are renamed on load as transformers does (``CHECKPOINT_RENAMES``).

    >>> from flopcount.models.vit_hf import ViTConfig, ViTForImageClassification
    >>> net = ViTForImageClassification(ViTConfig(num_hidden_layers=2, num_labels=10)).eval()
    >>> import flopcount.runtime as rt
    >>> net(rt.randn(1, 3, 224, 224)).shape
    (1, 10)
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import runtime as rt
from ..runtime import nn
from ..runtime.errors import ShapeError
from ._text import (activation, attention, check_heads, materialize, merge_heads, skeleton, split_heads,
                    SwitchableAttention)

__all__ = ["ViTConfig", "ViTModel", "ViTForImageClassification", "CHECKPOINT_RENAMES"]

# transformers 4 checkpoint names -> transformers 5 names, applied in order (as transformers'
# conversion_mapping does for "ViTModel")
CHECKPOINT_RENAMES = (
    (r"encoder\.layer\.", "layers."),
    (r"attention\.attention\.query", "attention.q_proj"),
    (r"attention\.attention\.key", "attention.k_proj"),
    (r"attention\.attention\.value", "attention.v_proj"),
    (r"attention\.output\.dense", "attention.o_proj"),
    (r"intermediate\.dense", "mlp.fc1"),
    (r"output\.dense", "mlp.fc2"),
)


@dataclass
class ViTConfig:
    """transformers' ``ViTConfig`` fields (defaults: google/vit-base-patch16-224)."""

    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.0
    attention_probs_dropout_prob: float = 0.0
    initializer_range: float = 0.02
    layer_norm_eps: float = 1e-12
    image_size: int = 224
    patch_size: int = 16
    num_channels: int = 3
    qkv_bias: bool = True
    pooler_output_size: int | None = None
    pooler_act: str = "tanh"
    num_labels: int = 1000
    attn_implementation: str = "eager"

    def __post_init__(self):
        check_heads(self, "hidden_size", "num_attention_heads")
        if self.pooler_output_size is None:
            self.pooler_output_size = self.hidden_size


class ViTPatchEmbeddings(nn.Module):
    def __init__(self, config: ViTConfig):
        super().__init__()
        self.image_size, self.patch_size = config.image_size, config.patch_size
        self.num_patches = (config.image_size // config.patch_size) ** 2
        self.projection = nn.Conv2d(config.num_channels, config.hidden_size, kernel_size=config.patch_size,
                                    stride=config.patch_size)

    def forward(self, pixel_values):
        return self.projection(pixel_values).flatten(2).transpose(1, 2)


class ViTEmbeddings(nn.Module):
    def __init__(self, config: ViTConfig):
        super().__init__()
        self.cls_token = nn.Parameter(rt.zeros(1, 1, config.hidden_size))
        self.patch_embeddings = ViTPatchEmbeddings(config)
        self.position_embeddings = nn.Parameter(rt.zeros(1, self.patch_embeddings.num_patches + 1,
                                                         config.hidden_size))
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.image_size = config.image_size

    def forward(self, pixel_values):
        batch, _, height, width = pixel_values.shape
        if (height, width) != (self.image_size, self.image_size):
            raise ShapeError(f"ViT: input image size ({height}*{width}) doesn't match the model "
                             f"({self.image_size}*{self.image_size})")
        embeddings = self.patch_embeddings(pixel_values)
        embeddings = rt.cat((self.cls_token.expand(batch, -1, -1), embeddings), dim=1)
        return self.dropout(embeddings + self.position_embeddings)


class ViTAttention(nn.Module):
    def __init__(self, config: ViTConfig):
        super().__init__()
        self.config = config
        self.head_dim = config.hidden_size // config.num_attention_heads
        width = config.num_attention_heads * self.head_dim
        self.q_proj = nn.Linear(config.hidden_size, width, bias=config.qkv_bias)
        self.k_proj = nn.Linear(config.hidden_size, width, bias=config.qkv_bias)
        self.v_proj = nn.Linear(config.hidden_size, width, bias=config.qkv_bias)
        self.o_proj = nn.Linear(width, config.hidden_size)

    def forward(self, hidden_states):
        d = self.head_dim
        q, k, v = (split_heads(p(hidden_states), d) for p in (self.q_proj, self.k_proj, self.v_proj))
        out = attention(q, k, v, None, scaling=d ** -0.5, implementation=self.config.attn_implementation,
                        dropout_p=self.config.attention_probs_dropout_prob, training=self.training)
        return self.o_proj(merge_heads(out))


class ViTMLP(nn.Module):
    def __init__(self, config: ViTConfig):
        super().__init__()
        self.activation_fn = activation(config.hidden_act)
        self.fc1 = nn.Linear(config.hidden_size, config.intermediate_size)
        self.fc2 = nn.Linear(config.intermediate_size, config.hidden_size)

    def forward(self, hidden_states):
        return self.fc2(self.activation_fn(self.fc1(hidden_states)))


class ViTLayer(nn.Module):
    """Pre-norm: x + attention(layernorm_before(x)), then + mlp(layernorm_after(.))."""

    def __init__(self, config: ViTConfig):
        super().__init__()
        self.attention = ViTAttention(config)
        self.layernorm_before = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.layernorm_after = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.mlp = ViTMLP(config)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, hidden_states):
        hidden_states = self.dropout(self.attention(self.layernorm_before(hidden_states))) + hidden_states
        return self.dropout(self.mlp(self.layernorm_after(hidden_states))) + hidden_states


class ViTPooler(nn.Module):
    def __init__(self, config: ViTConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.pooler_output_size)
        self.activation = activation(config.pooler_act)

    def forward(self, hidden_states):
        return self.activation(self.dense(hidden_states[:, 0]))


def _init_vit(model: nn.Module, std: float) -> None:
    """transformers' ViT init: Linear and Conv2d weights truncated normal, biases zero, norms 1
    and 0, the class token and positions truncated normal."""
    for module in model.modules():
        if isinstance(module, (nn.Linear, nn.Conv2d)):
            nn.init.trunc_normal_(module.weight, std=std)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.LayerNorm):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)
        elif isinstance(module, ViTEmbeddings):
            nn.init.trunc_normal_(module.position_embeddings, std=std)
            nn.init.trunc_normal_(module.cls_token, std=std)


class ViTModel(nn.Module, SwitchableAttention):
    """``forward(pixel_values)`` -> ``(last_hidden_state, pooler_output)`` (None without the pooler)."""

    def __init__(self, config: ViTConfig | None = None, add_pooling_layer: bool = True):
        super().__init__()
        self.config = config = config or ViTConfig()
        with skeleton() as device:
            self.embeddings = ViTEmbeddings(config)
            self.layers = nn.ModuleList([ViTLayer(config) for _ in range(config.num_hidden_layers)])
            self.layernorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
            self.pooler = ViTPooler(config) if add_pooling_layer else None
        materialize(self, device)
        _init_vit(self, config.initializer_range)

    def forward(self, pixel_values):
        hidden = self.embeddings(pixel_values)
        for layer in self.layers:
            hidden = layer(hidden)
        hidden = self.layernorm(hidden)
        return hidden, (self.pooler(hidden) if self.pooler is not None else None)


class ViTForImageClassification(nn.Module, SwitchableAttention):
    """``forward(pixel_values)`` -> logits (B, num_labels) from the class token's state."""

    def __init__(self, config: ViTConfig | None = None):
        super().__init__()
        self.config = config = config or ViTConfig()
        with skeleton() as device:
            self.vit = ViTModel(config, add_pooling_layer=False)
            self.classifier = nn.Linear(config.hidden_size, config.num_labels) if config.num_labels > 0 \
                else nn.Identity()
        materialize(self, device)
        _init_vit(self, config.initializer_range)

    def forward(self, pixel_values):
        hidden, _ = self.vit(pixel_values)
        return self.classifier(hidden[:, 0, :])
