"""RoBERTa (Liu et al., 2019) as Hugging Face transformers' ``RobertaModel``, ``RobertaForMaskedLM``
and ``RobertaForSequenceClassification``.

BERT's encoder (``bert.py``) with RoBERTa's embeddings: positions count the non-padding tokens
from ``pad_token_id + 1`` (fairseq's ``make_positions``), one token type. Paths and parameter
names are transformers' (``roberta.embeddings.word_embeddings``, ``lm_head.dense``,
``classifier.out_proj``), so a checkpoint loads with ``strict=True``.

    >>> from flopcount import models
    >>> net = models.get("roberta_base", num_hidden_layers=2).eval()
    >>> hidden, pooled = net(models.example_input("roberta_base"))
    >>> hidden.shape
    (1, 128, 768)
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import runtime as rt
from ..runtime import nn
from ..runtime.nn import functional as F
from ._registry import register_model, token_input
from ._text import config_from
from .bert import BertConfig, BertModel, _HeadModel

__all__ = ["RobertaConfig", "RobertaModel", "RobertaForMaskedLM", "RobertaForSequenceClassification",
           "roberta_base"]


@dataclass
class RobertaConfig(BertConfig):
    """transformers' ``RobertaConfig`` fields (defaults: roberta-base)."""

    vocab_size: int = 50265
    max_position_embeddings: int = 514
    type_vocab_size: int = 1
    layer_norm_eps: float = 1e-5
    pad_token_id: int = 1


class RobertaEmbeddings(nn.Module):
    """Word + token type + position embeddings (positions from the non-padding tokens), LayerNorm, dropout."""

    def __init__(self, config: RobertaConfig):
        super().__init__()
        self.padding_idx = config.pad_token_id
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=self.padding_idx)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size,
                                                padding_idx=self.padding_idx)
        length = config.max_position_embeddings
        self.register_buffer("token_type_ids", rt.zeros(1, length, dtype=rt.int64), persistent=False)

    def reset_buffers(self) -> None:
        self.token_type_ids.zero_()

    def position_ids_from(self, input_ids):
        """Positions padding_idx + 1, + 2... over the tokens, padding_idx at padding (as transformers
        computes them, op for op, so both count alike)."""
        mask = input_ids.ne(self.padding_idx).int()
        incremental = (rt.cumsum(mask, 1).type_as(mask) + 0) * mask
        return incremental.long() + self.padding_idx

    def forward(self, input_ids, token_type_ids=None, position_ids=None):
        batch, length = input_ids.shape
        if position_ids is None:
            position_ids = self.position_ids_from(input_ids)
        if token_type_ids is None:
            token_type_ids = self.token_type_ids[:, :length].expand(batch, length)
        embeddings = self.word_embeddings(input_ids) + self.token_type_embeddings(token_type_ids)
        embeddings = embeddings + self.position_embeddings(position_ids)
        return self.dropout(self.LayerNorm(embeddings))


class RobertaModel(BertModel):
    """``forward(input_ids, attention_mask=None, token_type_ids=None, position_ids=None)`` ->
    ``(last_hidden_state, pooler_output)``, as ``BertModel``."""

    def __init__(self, config: RobertaConfig | None = None, add_pooling_layer: bool | None = None):
        super().__init__(config or RobertaConfig(), add_pooling_layer, embeddings=RobertaEmbeddings)


class RobertaLMHead(nn.Module):
    """dense, GELU, layer_norm, decoder (weight tied to the word embedding, bias to ``bias``)."""

    def __init__(self, config: RobertaConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.layer_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.decoder = nn.Linear(config.hidden_size, config.vocab_size)
        self.bias = self.decoder.bias

    def forward(self, features):
        return self.decoder(self.layer_norm(F.gelu(self.dense(features))))


class RobertaClassificationHead(nn.Module):
    """The first token's state: dropout, dense, tanh, dropout, out_proj."""

    def __init__(self, config: RobertaConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.dropout = nn.Dropout(config.hidden_dropout_prob if config.classifier_dropout is None
                                  else config.classifier_dropout)
        self.out_proj = nn.Linear(config.hidden_size, config.num_labels)

    def forward(self, features):
        x = self.dropout(features[:, 0, :])
        x = self.dropout(rt.tanh(self.dense(x)))
        return self.out_proj(x)


class RobertaForMaskedLM(_HeadModel):
    """``forward(...)`` -> logits (B, L, vocab_size)."""

    base_name = "roberta"

    def __init__(self, config: RobertaConfig | None = None):
        def head(model):
            model.lm_head = RobertaLMHead(model.config)

        super().__init__(config or RobertaConfig(), lambda c: RobertaModel(c, add_pooling_layer=False), head,
                         tie="lm_head.decoder")

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None):
        hidden, _ = self.roberta(input_ids, attention_mask, token_type_ids, position_ids)
        return self.lm_head(hidden)


class RobertaForSequenceClassification(_HeadModel):
    """``forward(...)`` -> logits (B, num_labels)."""

    base_name = "roberta"

    def __init__(self, config: RobertaConfig | None = None):
        def head(model):
            model.classifier = RobertaClassificationHead(model.config)

        super().__init__(config or RobertaConfig(), lambda c: RobertaModel(c, add_pooling_layer=False), head)

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None):
        hidden, _ = self.roberta(input_ids, attention_mask, token_type_ids, position_ids)
        return self.classifier(hidden)


@register_model("roberta_base", family="roberta", inputs=token_input(128, 50265), params=124_645_632,
                description="RoBERTa-base encoder (transformers RobertaModel), 12 layers, hidden 768")
def roberta_base(**config) -> RobertaModel:
    """RoBERTa-base; keyword arguments override ``RobertaConfig`` fields."""
    return RobertaModel(config_from(RobertaConfig, config))
