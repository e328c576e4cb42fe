"""BERT (Devlin et al., 2018) as Hugging Face transformers' ``BertModel``.

Module paths and parameter names are transformers' (``embeddings.word_embeddings``,
``encoder.layer.{i}.attention.self.query``, ``...attention.output.LayerNorm``, ``pooler.dense``),
so a ``BertModel`` state dict converted to numpy loads with ``strict=True``.

    >>> from flopcount import models
    >>> net = models.get("bert_base", num_hidden_layers=2).eval()
    >>> hidden, pooled = net(models.example_input("bert_base"))
    >>> hidden.shape, pooled.shape
    ((1, 128, 768), (1, 768))
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import runtime as rt
from ..runtime import nn
from ._registry import register_model, token_input
from ._text import (activation, attention, build_mask, check_heads, config_from, init_weights,
                    materialize, merge_heads, skeleton, split_heads, SwitchableAttention)

__all__ = ["BertConfig", "BertModel", "BertForMaskedLM", "BertForSequenceClassification", "bert_base"]


@dataclass
class BertConfig:
    """transformers' ``BertConfig`` fields (defaults: bert-base-uncased)."""

    vocab_size: int = 30522
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    layer_norm_eps: float = 1e-12
    pad_token_id: int = 0
    add_pooling_layer: bool = True
    num_labels: int = 2
    classifier_dropout: float | None = None
    attn_implementation: str = "eager"

    def __post_init__(self):
        check_heads(self, "hidden_size", "num_attention_heads")


class BertEmbeddings(nn.Module):
    """Word + token type + position embeddings, then LayerNorm and dropout."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        # Not state: transformers keeps them as non-persistent buffers so they follow .to(device).
        length = config.max_position_embeddings
        self.register_buffer("position_ids", rt.arange(length).reshape(1, -1), persistent=False)
        self.register_buffer("token_type_ids", rt.zeros(1, length, dtype=rt.int64), persistent=False)

    def reset_buffers(self) -> None:
        self.position_ids.copy_(rt.arange(self.position_ids.shape[1]).reshape(1, -1))
        self.token_type_ids.zero_()

    def forward(self, input_ids, token_type_ids=None, position_ids=None):
        batch, length = input_ids.shape
        if position_ids is None:
            position_ids = self.position_ids[:, :length]
        if token_type_ids is None:
            token_type_ids = self.token_type_ids[:, :length].expand(batch, length)
        embeddings = self.word_embeddings(input_ids) + self.token_type_embeddings(token_type_ids)
        embeddings = embeddings + self.position_embeddings(position_ids)
        return self.dropout(self.LayerNorm(embeddings))


class BertSelfAttention(nn.Module):
    """query/key/value projections and multi-head softmax attention (see _text.attention)."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.num_attention_heads = config.num_attention_heads
        self.attention_head_size = config.hidden_size // config.num_attention_heads
        self.all_head_size = self.num_attention_heads * self.attention_head_size
        self.scaling = self.attention_head_size ** -0.5
        self.config = config  # shared: config.attn_implementation switches every layer at once
        self.query = nn.Linear(config.hidden_size, self.all_head_size)
        self.key = nn.Linear(config.hidden_size, self.all_head_size)
        self.value = nn.Linear(config.hidden_size, self.all_head_size)
        self.dropout = nn.Dropout(config.attention_probs_dropout_prob)

    def forward(self, hidden_states, attention_mask=None):
        d = self.attention_head_size
        q = split_heads(self.query(hidden_states), d)
        k = split_heads(self.key(hidden_states), d)
        v = split_heads(self.value(hidden_states), d)
        out = attention(q, k, v, attention_mask, scaling=self.scaling,
                        implementation=self.config.attn_implementation,
                        dropout_p=self.dropout.p, training=self.training)
        return merge_heads(out)


class _ProjectAddNorm(nn.Module):
    """Projection from ``in_features`` to the hidden size, dropout, residual add, LayerNorm
    (post-norm): transformers' BertSelfOutput and BertOutput, which differ only in ``in_features``."""

    def __init__(self, config: BertConfig, in_features: int):
        super().__init__()
        self.dense = nn.Linear(in_features, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, hidden_states, input_tensor):
        return self.LayerNorm(self.dropout(self.dense(hidden_states)) + input_tensor)


class BertSelfOutput(_ProjectAddNorm):
    """After attention: output projection, dropout, residual add, LayerNorm."""

    def __init__(self, config: BertConfig):
        super().__init__(config, config.hidden_size)


class BertAttention(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.self = BertSelfAttention(config)
        self.output = BertSelfOutput(config)

    def forward(self, hidden_states, attention_mask=None):
        return self.output(self.self(hidden_states, attention_mask), hidden_states)


class BertIntermediate(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.intermediate_size)
        self.intermediate_act_fn = activation(config.hidden_act)

    def forward(self, hidden_states):
        return self.intermediate_act_fn(self.dense(hidden_states))


class BertOutput(_ProjectAddNorm):
    """After the MLP: projection back from the intermediate size, dropout, residual add, LayerNorm."""

    def __init__(self, config: BertConfig):
        super().__init__(config, config.intermediate_size)


class BertLayer(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.attention = BertAttention(config)
        self.intermediate = BertIntermediate(config)
        self.output = BertOutput(config)

    def forward(self, hidden_states, attention_mask=None):
        attention_output = self.attention(hidden_states, attention_mask)
        return self.output(self.intermediate(attention_output), attention_output)


class BertEncoder(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.layer = nn.ModuleList([BertLayer(config) for _ in range(config.num_hidden_layers)])

    def forward(self, hidden_states, attention_mask=None):
        for layer in self.layer:
            hidden_states = layer(hidden_states, attention_mask)
        return hidden_states


class BertPooler(nn.Module):
    """tanh(dense(hidden state of the first token))."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.activation = nn.Tanh()

    def forward(self, hidden_states):
        return self.activation(self.dense(hidden_states[:, 0]))


class BertModel(nn.Module, SwitchableAttention):
    """The BERT encoder. ``forward(input_ids, attention_mask=None, token_type_ids=None,
    position_ids=None)`` returns ``(last_hidden_state, pooler_output)`` like transformers with
    ``return_dict=False`` (``pooler_output`` is None without the pooling layer).

    ``attention_mask`` is (B, L) with 1 for tokens to attend and 0 for padding.
    """

    def __init__(self, config: BertConfig | None = None, add_pooling_layer: bool | None = None,
                 embeddings: type | None = None):
        super().__init__()
        self.config = config or BertConfig()
        pooling = self.config.add_pooling_layer if add_pooling_layer is None else add_pooling_layer
        with skeleton() as device:
            self.embeddings = (embeddings or BertEmbeddings)(self.config)
            self.encoder = BertEncoder(self.config)
            self.pooler = BertPooler(self.config) if pooling else None
        materialize(self, device)
        init_weights(self, self.config.initializer_range)

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None):
        hidden = self.embeddings(input_ids, token_type_ids, position_ids)
        mask = build_mask(attention_mask, input_ids.shape[1], hidden.device, causal=False,
                          implementation=self.config.attn_implementation, dtype=hidden.dtype)
        hidden = self.encoder(hidden, mask)
        pooled = self.pooler(hidden) if self.pooler is not None else None
        return hidden, pooled


class BertPredictionHeadTransform(nn.Module):
    """dense, activation, LayerNorm: the masked-LM head's transform."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.transform_act_fn = activation(config.hidden_act)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)

    def forward(self, hidden_states):
        return self.LayerNorm(self.transform_act_fn(self.dense(hidden_states)))


class BertLMPredictionHead(nn.Module):
    """The transform, then the decoder to the vocabulary; its weight is the word embedding and its
    bias the head's ``bias`` (both tied, as in transformers)."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.transform = BertPredictionHeadTransform(config)
        self.decoder = nn.Linear(config.hidden_size, config.vocab_size)
        self.bias = self.decoder.bias

    def forward(self, hidden_states):
        return self.decoder(self.transform(hidden_states))


class BertOnlyMLMHead(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.predictions = BertLMPredictionHead(config)

    def forward(self, sequence_output):
        return self.predictions(sequence_output)


class _HeadModel(nn.Module, SwitchableAttention):
    """An encoder ``self.<base_name>`` (built by ``base``) under a task head built by ``head``;
    weights initialized as transformers' ``post_init`` does, the decoder tied to the word
    embedding when ``tie``."""

    base_name = "bert"

    def __init__(self, config, base, head, tie: str | None = None):
        super().__init__()
        self.config = config
        with skeleton() as device:
            setattr(self, self.base_name, base(config))
            head(self)
        materialize(self, device)
        init_weights(self, config.initializer_range)
        if tie is not None:
            decoder = self.get_submodule(tie)
            decoder.weight = getattr(self, self.base_name).embeddings.word_embeddings.weight


class BertForMaskedLM(_HeadModel):
    """BERT with its masked-LM head: ``forward(input_ids, attention_mask=None, token_type_ids=None,
    position_ids=None)`` -> logits (B, L, vocab_size)."""

    def __init__(self, config: BertConfig | None = None):
        def head(model):
            model.cls = BertOnlyMLMHead(model.config)

        super().__init__(config or BertConfig(), lambda c: BertModel(c, add_pooling_layer=False), head,
                         tie="cls.predictions.decoder")

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None):
        hidden, _ = self.bert(input_ids, attention_mask, token_type_ids, position_ids)
        return self.cls(hidden)


class BertForSequenceClassification(_HeadModel):
    """BERT, its pooler, dropout and a linear classifier: ``forward(...)`` -> logits (B, num_labels)."""

    def __init__(self, config: BertConfig | None = None):
        def head(model):
            c = model.config
            model.dropout = nn.Dropout(c.hidden_dropout_prob if c.classifier_dropout is None else c.classifier_dropout)
            model.classifier = nn.Linear(c.hidden_size, c.num_labels)

        super().__init__(config or BertConfig(), lambda c: BertModel(c, add_pooling_layer=True), head)

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None):
        _, pooled = self.bert(input_ids, attention_mask, token_type_ids, position_ids)
        return self.classifier(self.dropout(pooled))


@register_model("bert_base", family="bert", inputs=token_input(128, 30522), params=109_482_240,
                description="BERT-base encoder (transformers BertModel), 12 layers, hidden 768")
def bert_base(**config) -> BertModel:
    """BERT-base; keyword arguments override ``BertConfig`` fields."""
    return BertModel(config_from(BertConfig, config))
