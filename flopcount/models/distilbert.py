"""DistilBERT (Sanh et al., 2019) as Hugging Face transformers' ``DistilBertModel``,
``DistilBertForMaskedLM`` and ``DistilBertForSequenceClassification``.

Word + position embeddings (no token types), then post-norm blocks: attention (``q_lin``,
``k_lin``, ``v_lin``, ``out_lin``), ``sa_layer_norm``, the FFN (``lin1``, activation, ``lin2``),
``output_layer_norm``. Parameter names are transformers' (``distilbert.transformer.layer.{i}...``,
``vocab_projector`` tied to the word embedding).

    >>> from flopcount import models
    >>> net = models.get("distilbert_base", n_layers=2).eval()
    >>> net(models.example_input("distilbert_base")).shape
    (1, 128, 768)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import runtime as rt
from ..runtime import nn
from ._registry import register_model, token_input
from ._text import (activation, attention, build_mask, check_heads, config_from, init_weights,
                    materialize, merge_heads, skeleton, split_heads, SwitchableAttention)

__all__ = ["DistilBertConfig", "DistilBertModel", "DistilBertForMaskedLM", "DistilBertForSequenceClassification",
           "distilbert_base"]

LAYER_NORM_EPS = 1e-12   # fixed in transformers' DistilBERT, not a config field


@dataclass
class DistilBertConfig:
    """transformers' ``DistilBertConfig`` fields (defaults: distilbert-base-uncased)."""

    vocab_size: int = 30522
    max_position_embeddings: int = 512
    sinusoidal_pos_embds: bool = False
    n_layers: int = 6
    n_heads: int = 12
    dim: int = 768
    hidden_dim: int = 3072
    dropout: float = 0.1
    attention_dropout: float = 0.1
    activation: str = "gelu"
    initializer_range: float = 0.02
    qa_dropout: float = 0.1
    seq_classif_dropout: float = 0.2
    pad_token_id: int = 0
    num_labels: int = 2
    attn_implementation: str = "eager"

    def __post_init__(self):
        check_heads(self, "dim", "n_heads")


def sinusoidal_positions(n_pos: int, dim: int) -> np.ndarray:
    """sin on even, cos on odd features of pos / 10000^(2·(j // 2) / dim) (transformers' table)."""
    j = np.arange(dim)
    angle = np.arange(n_pos)[:, None] / np.power(10000, 2 * (j // 2) / dim)
    return np.where(j % 2 == 0, np.sin(angle), np.cos(angle)).astype(np.float32)


class Embeddings(nn.Module):
    def __init__(self, config: DistilBertConfig):
        super().__init__()
        self.config = config
        self.word_embeddings = nn.Embedding(config.vocab_size, config.dim, padding_idx=config.pad_token_id)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.dim)
        self.LayerNorm = nn.LayerNorm(config.dim, eps=LAYER_NORM_EPS)
        self.dropout = nn.Dropout(config.dropout)
        self.register_buffer("position_ids", rt.arange(config.max_position_embeddings).reshape(1, -1),
                             persistent=False)

    def reset_buffers(self) -> None:
        self.position_ids.copy_(rt.arange(self.position_ids.shape[1]).reshape(1, -1))

    def forward(self, input_ids, position_ids=None):
        if position_ids is None:
            position_ids = self.position_ids[:, :input_ids.shape[1]]
        embeddings = self.word_embeddings(input_ids) + self.position_embeddings(position_ids)
        return self.dropout(self.LayerNorm(embeddings))


class DistilBertSelfAttention(nn.Module):
    def __init__(self, config: DistilBertConfig):
        super().__init__()
        self.config = config
        self.head_dim = config.dim // config.n_heads
        self.q_lin = nn.Linear(config.dim, config.dim)
        self.k_lin = nn.Linear(config.dim, config.dim)
        self.v_lin = nn.Linear(config.dim, config.dim)
        self.out_lin = nn.Linear(config.dim, config.dim)
        self.dropout = nn.Dropout(config.attention_dropout)

    def forward(self, hidden_states, mask=None):
        d = self.head_dim
        q, k, v = (split_heads(lin(hidden_states), d) for lin in (self.q_lin, self.k_lin, self.v_lin))
        out = attention(q, k, v, mask, scaling=d ** -0.5, implementation=self.config.attn_implementation,
                        dropout_p=self.dropout.p, training=self.training)
        return self.out_lin(merge_heads(out))


class FFN(nn.Module):
    def __init__(self, config: DistilBertConfig):
        super().__init__()
        self.dropout = nn.Dropout(config.dropout)
        self.lin1 = nn.Linear(config.dim, config.hidden_dim)
        self.lin2 = nn.Linear(config.hidden_dim, config.dim)
        self.activation = activation(config.activation)

    def forward(self, x):
        return self.dropout(self.lin2(self.activation(self.lin1(x))))


class TransformerBlock(nn.Module):
    """Post-norm: LayerNorm(attention(x) + x), then LayerNorm(ffn(.) + .)."""

    def __init__(self, config: DistilBertConfig):
        super().__init__()
        self.attention = DistilBertSelfAttention(config)
        self.sa_layer_norm = nn.LayerNorm(config.dim, eps=LAYER_NORM_EPS)
        self.ffn = FFN(config)
        self.output_layer_norm = nn.LayerNorm(config.dim, eps=LAYER_NORM_EPS)

    def forward(self, hidden_states, mask=None):
        attended = self.sa_layer_norm(self.attention(hidden_states, mask) + hidden_states)
        return self.output_layer_norm(self.ffn(attended) + attended)


class Transformer(nn.Module):
    def __init__(self, config: DistilBertConfig):
        super().__init__()
        self.layer = nn.ModuleList([TransformerBlock(config) for _ in range(config.n_layers)])

    def forward(self, hidden_states, mask=None):
        for block in self.layer:
            hidden_states = block(hidden_states, mask)
        return hidden_states


class _DistilBert(nn.Module, SwitchableAttention):
    """Weights as transformers initializes them, sinusoidal positions when the config asks."""

    def _init(self, device) -> None:
        materialize(self, device)
        init_weights(self, self.config.initializer_range)
        if self.config.sinusoidal_pos_embds:
            table = self.get_submodule(self._embeddings).position_embeddings.weight
            if table.data is not None:
                table.data[...] = sinusoidal_positions(*table.shape)


class DistilBertModel(_DistilBert):
    """``forward(input_ids, attention_mask=None, position_ids=None)`` -> last hidden state (B, L, dim)."""

    _embeddings = "embeddings"

    def __init__(self, config: DistilBertConfig | None = None):
        super().__init__()
        self.config = config or DistilBertConfig()
        with skeleton() as device:
            self.embeddings = Embeddings(self.config)
            self.transformer = Transformer(self.config)
        self._init(device)

    def forward(self, input_ids, attention_mask=None, position_ids=None):
        hidden = self.embeddings(input_ids, position_ids)
        mask = build_mask(attention_mask, input_ids.shape[1], hidden.device, causal=False,
                          implementation=self.config.attn_implementation)
        return self.transformer(hidden, mask)


class DistilBertForMaskedLM(_DistilBert):
    """``forward(...)`` -> logits (B, L, vocab_size); ``vocab_projector`` is tied to the word embedding."""

    _embeddings = "distilbert.embeddings"

    def __init__(self, config: DistilBertConfig | None = None):
        super().__init__()
        self.config = config = config or DistilBertConfig()
        with skeleton() as device:
            self.activation = activation(config.activation)
            self.distilbert = DistilBertModel(config)
            self.vocab_transform = nn.Linear(config.dim, config.dim)
            self.vocab_layer_norm = nn.LayerNorm(config.dim, eps=LAYER_NORM_EPS)
            self.vocab_projector = nn.Linear(config.dim, config.vocab_size)
        self._init(device)
        self.vocab_projector.weight = self.distilbert.embeddings.word_embeddings.weight

    def forward(self, input_ids, attention_mask=None, position_ids=None):
        hidden = self.distilbert(input_ids, attention_mask, position_ids)
        hidden = self.vocab_layer_norm(self.activation(self.vocab_transform(hidden)))
        return self.vocab_projector(hidden)


class DistilBertForSequenceClassification(_DistilBert):
    """``forward(...)`` -> logits (B, num_labels) from the first token's state."""

    _embeddings = "distilbert.embeddings"

    def __init__(self, config: DistilBertConfig | None = None):
        super().__init__()
        self.config = config = config or DistilBertConfig()
        with skeleton() as device:
            self.distilbert = DistilBertModel(config)
            self.pre_classifier = nn.Linear(config.dim, config.dim)
            self.classifier = nn.Linear(config.dim, config.num_labels)
            self.dropout = nn.Dropout(config.seq_classif_dropout)
        self._init(device)

    def forward(self, input_ids, attention_mask=None, position_ids=None):
        pooled = self.distilbert(input_ids, attention_mask, position_ids)[:, 0]
        return self.classifier(self.dropout(self.pre_classifier(pooled).relu()))


@register_model("distilbert_base", family="distilbert", inputs=token_input(128, 30522), params=66_362_880,
                description="DistilBERT-base encoder (transformers DistilBertModel), 6 layers, hidden 768")
def distilbert_base(**config) -> DistilBertModel:
    """DistilBERT-base; keyword arguments override ``DistilBertConfig`` fields."""
    return DistilBertModel(config_from(DistilBertConfig, config))
