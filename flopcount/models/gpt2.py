"""GPT-2 (Radford et al., 2019) as Hugging Face transformers' ``GPT2LMHeadModel``.

Paths follow transformers (``transformer.wte``, ``transformer.h.{i}.attn.c_attn``, ``...mlp.c_fc``,
``transformer.ln_f``, ``lm_head``); ``lm_head.weight`` *is* ``transformer.wte.weight`` (tied, so
counted once: 124,439,808 parameters for the 124M model).

Attention: ``attn_implementation="eager"`` (default) runs QKᵀ and PV as two ``matmul`` ops with an
additive causal mask; ``"sdpa"`` runs one ``scaled_dot_product_attention`` with ``is_causal=True``
(see _text.py). Both count the two contractions in full.

KV cache: as the decoders of ``_decoder.py``, ``forward(..., past_key_values=None, use_cache=None)``
returns the logits, or a ``CausalLMOutputWithPast`` (``logits``, ``past_key_values``) when a cache
is in play; new tokens' positions follow the cache's length.

    >>> from flopcount import models
    >>> net = models.get("gpt2", n_layer=2).eval()
    >>> net(models.example_input("gpt2")).shape
    (1, 128, 50257)
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import runtime as rt
from ..runtime import nn
from ..runtime.factories import empty
from ..runtime.ops.linalg import linear
from ._cache import CacheLayout, CausalLMOutputWithPast, as_cache
from ._registry import register_model, token_input
from ._text import (activation, attention, check_heads, config_from, decoder_mask, init_weights,
                    materialize, merge_heads, residual_std, skeleton, split_heads, SwitchableAttention)

__all__ = ["GPT2Config", "Conv1D", "GPT2Model", "GPT2LMHeadModel", "gpt2"]


@dataclass
class GPT2Config:
    """transformers' ``GPT2Config`` fields (defaults: the 124M "gpt2" checkpoint)."""

    vocab_size: int = 50257
    n_positions: int = 1024
    n_embd: int = 768
    n_layer: int = 12
    n_head: int = 12
    n_inner: int | None = None
    activation_function: str = "gelu_new"
    resid_pdrop: float = 0.1
    embd_pdrop: float = 0.1
    attn_pdrop: float = 0.1
    layer_norm_epsilon: float = 1e-5
    initializer_range: float = 0.02
    scale_attn_weights: bool = True
    scale_attn_by_inverse_layer_idx: bool = False
    attn_implementation: str = "eager"

    def __post_init__(self):
        check_heads(self, "n_embd", "n_head")


class Conv1D(nn.Module):
    """GPT-2's "Conv1D": a linear layer whose ``weight`` is stored (nx, nf), i.e. (in, out).

    It runs as the runtime's ``linear`` op on the transposed view of the weight (a free
    ``permute``), so the MACs are counted as any linear layer's: rows·nx·nf, plus the bias adds.
    """

    def __init__(self, nf: int, nx: int):
        super().__init__()
        self.nf = nf
        self.nx = nx
        self.weight = nn.Parameter(empty(nx, nf))
        self.bias = nn.Parameter(rt.zeros(nf))
        nn.init.normal_(self.weight, std=0.02)

    def forward(self, x):
        return linear(x, self.weight.T, self.bias)

    def as_linear(self) -> nn.Linear:
        """The same layer as an ``nn.Linear`` (weight (out, in), the transposed view of this one's):
        how weight formats (``rt.quantize_weights``) take it."""
        with rt.meta():  # no weights drawn for a layer whose own are replaced at once
            layer = nn.Linear(self.nx, self.nf)
        layer.weight = nn.Parameter(self.weight.detach().T, requires_grad=self.weight.requires_grad)
        layer.bias = self.bias
        return layer

    def extra_repr(self) -> str:
        return f"nf={self.nf}, nx={self.nx}"


class GPT2Attention(nn.Module):
    """Causal self-attention: fused q/k/v projection ``c_attn``, output projection ``c_proj``."""

    def __init__(self, config: GPT2Config, layer_idx: int):
        super().__init__()
        self.layer_idx = layer_idx
        self.embed_dim = config.n_embd
        self.num_heads = config.n_head
        self.head_dim = self.embed_dim // self.num_heads
        self.scaling = self.head_dim ** -0.5 if config.scale_attn_weights else 1.0
        if config.scale_attn_by_inverse_layer_idx:
            self.scaling /= float(layer_idx + 1)
        self.config = config  # shared: config.attn_implementation switches every layer at once
        self.c_attn = Conv1D(3 * self.embed_dim, self.embed_dim)
        self.c_proj = Conv1D(self.embed_dim, self.embed_dim)
        self.attn_dropout = nn.Dropout(config.attn_pdrop)
        self.resid_dropout = nn.Dropout(config.resid_pdrop)

    def forward(self, hidden_states, attention_mask=(None, True), past_key_values=None):
        """``attention_mask`` is ``(mask, is_causal)`` as ``_text.decoder_mask`` gives it."""
        q, k, v = self.c_attn(hidden_states).split(self.embed_dim, dim=2)
        q, k, v = (split_heads(t, self.head_dim) for t in (q, k, v))
        if past_key_values is not None:
            k, v = past_key_values.update(k, v, self.layer_idx)
        mask, is_causal = attention_mask
        out = attention(q, k, v, mask, scaling=self.scaling, implementation=self.config.attn_implementation,
                        causal=is_causal, dropout_p=self.attn_dropout.p, training=self.training)
        return self.resid_dropout(self.c_proj(merge_heads(out)))


class GPT2MLP(nn.Module):
    def __init__(self, intermediate_size: int, config: GPT2Config):
        super().__init__()
        self.c_fc = Conv1D(intermediate_size, config.n_embd)
        self.c_proj = Conv1D(config.n_embd, intermediate_size)
        self.act = activation(config.activation_function)
        self.dropout = nn.Dropout(config.resid_pdrop)

    def forward(self, hidden_states):
        return self.dropout(self.c_proj(self.act(self.c_fc(hidden_states))))


class GPT2Block(nn.Module):
    """Pre-norm block: x + attn(ln_1(x)), then x + mlp(ln_2(x))."""

    def __init__(self, config: GPT2Config, layer_idx: int):
        super().__init__()
        inner = config.n_inner if config.n_inner is not None else 4 * config.n_embd
        self.ln_1 = nn.LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)
        self.attn = GPT2Attention(config, layer_idx)
        self.ln_2 = nn.LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)
        self.mlp = GPT2MLP(inner, config)

    def forward(self, hidden_states, attention_mask=(None, True), past_key_values=None):
        hidden_states = hidden_states + self.attn(self.ln_1(hidden_states), attention_mask, past_key_values)
        return hidden_states + self.mlp(self.ln_2(hidden_states))


class GPT2Model(nn.Module):
    """Token and position embeddings, ``n_layer`` blocks, final LayerNorm ``ln_f``; ``forward``
    returns the last hidden state and grows the DynamicCache it is given."""

    def __init__(self, config: GPT2Config):
        super().__init__()
        self.config = config
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)
        self.wpe = nn.Embedding(config.n_positions, config.n_embd)
        self.drop = nn.Dropout(config.embd_pdrop)
        self.h = nn.ModuleList([GPT2Block(config, i) for i in range(config.n_layer)])
        self.ln_f = nn.LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None, past_key_values=None):
        length = input_ids.shape[1]
        cache = None if past_key_values is None else as_cache(past_key_values, None)
        past = cache.get_seq_length() if cache is not None else 0
        if position_ids is None:
            position_ids = rt.arange(past, past + length, device=input_ids.device).unsqueeze(0)
        hidden = self.wte(input_ids) + self.wpe(position_ids)
        if token_type_ids is not None:
            hidden = hidden + self.wte(token_type_ids)  # transformers reuses wte for token types
        hidden = self.drop(hidden)
        mask = decoder_mask(attention_mask, length, past, past + length, 0, hidden.device,
                            self.config.attn_implementation, hidden.dtype)
        for block in self.h:
            hidden = block(hidden, mask, cache)
        return self.ln_f(hidden)


class GPT2LMHeadModel(nn.Module, SwitchableAttention):
    """GPT-2 with its language-model head tied to the token embedding.

    ``forward(input_ids, attention_mask=None, token_type_ids=None, position_ids=None,
    past_key_values=None, use_cache=None)`` returns the logits (B, L, vocab_size), or with a cache
    a ``CausalLMOutputWithPast``. ``attention_mask`` is (B, cached + new tokens), 1 for tokens and
    0 for padding.
    """

    def __init__(self, config: GPT2Config | None = None):
        super().__init__()
        self.config = config or GPT2Config()
        with skeleton() as device:
            self.transformer = GPT2Model(self.config)
            self.lm_head = nn.Linear(self.config.n_embd, self.config.vocab_size, bias=False)
        materialize(self, device)
        self._init_weights()
        self.lm_head.weight = self.transformer.wte.weight

    def _init_weights(self) -> None:
        std = self.config.initializer_range
        # The head is tied right after; skip drawing its (soon replaced) weights.
        init_weights(self.transformer, std)
        for module in self.modules():
            if isinstance(module, Conv1D):
                nn.init.normal_(module.weight, 0.0, std)
                nn.init.zeros_(module.bias)
        for module in self.modules():
            if isinstance(module, (GPT2Attention, GPT2MLP)):
                nn.init.normal_(module.c_proj.weight, 0.0, residual_std(std, self.config.n_layer))

    def kv_cache_layout(self) -> list:
        """Each layer's cache: every head's keys and values, no window."""
        return [CacheLayout.heads(self.config.n_head, self.config.n_embd // self.config.n_head)] * self.config.n_layer

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None, past_key_values=None,
                use_cache=None):
        if use_cache is None:
            use_cache = past_key_values is not None
        cache = as_cache(past_key_values, None) if use_cache or past_key_values is not None else None
        logits = self.lm_head(self.transformer(input_ids, attention_mask, token_type_ids, position_ids, cache))
        if not use_cache:
            return logits
        return CausalLMOutputWithPast(logits=logits, past_key_values=cache)


@register_model("gpt2", family="gpt2", inputs=token_input(128, 50257), params=124_439_808,
                description="GPT-2 124M (transformers GPT2LMHeadModel, tied head)")
def gpt2(**config) -> GPT2LMHeadModel:
    """GPT-2 small; keyword arguments override ``GPT2Config`` fields."""
    return GPT2LMHeadModel(config_from(GPT2Config, config))
