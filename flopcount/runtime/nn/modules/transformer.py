"""MultiheadAttention and the Transformer layers, with PyTorch's arguments and parameter names.

Attention uses the fused ``scaled_dot_product_attention`` op when the attention weights are not
asked for (as the Transformer layers do), and explicit matmuls and a softmax when they are.
"""

from __future__ import annotations

import copy
import math

import numpy as np

from ... import dtypes as _dt
from ...errors import ShapeError
from ...factories import empty
from ...ops.activations import gelu, relu
from ...ops.attention import multi_head_attention_forward
from ...ops.movement import transpose
from .. import init
from ..parameter import Parameter
from .container import ModuleList
from .dropout import Dropout
from .linear import Linear
from .module import Module
from .normalization import LayerNorm

__all__ = ["NonDynamicallyQuantizableLinear", "MultiheadAttention", "TransformerEncoderLayer",
           "TransformerDecoderLayer", "TransformerEncoder", "TransformerDecoder", "Transformer"]


class NonDynamicallyQuantizableLinear(Linear):
    """A Linear under the class name PyTorch gives MultiheadAttention's ``out_proj``."""


class MultiheadAttention(Module):
    """Attention over ``num_heads`` heads of size embed_dim / num_heads.

    Parameters as PyTorch: ``in_proj_weight`` (3E, E) when key and value have the embedding size,
    otherwise ``q_proj_weight``, ``k_proj_weight``, ``v_proj_weight``; ``in_proj_bias`` (3E) and
    ``out_proj``. Inputs are (L, N, E), (N, L, E) with ``batch_first``, or unbatched (L, E).
    ``add_bias_kv`` and ``add_zero_attn`` are not supported.

    >>> mha = MultiheadAttention(8, 2, batch_first=True)
    >>> x = rt.randn(1, 5, 8)
    >>> out, weights = mha(x, x, x)
    >>> out.shape, weights.shape
    ((1, 5, 8), (1, 5, 5))
    """

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 add_bias_kv: bool = False, add_zero_attn: bool = False, kdim: int | None = None,
                 vdim: int | None = None, batch_first: bool = False, device=None, dtype=None):
        super().__init__()
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"MultiheadAttention: embed_dim ({embed_dim}) and num_heads ({num_heads}) "
                             f"must be positive")
        if embed_dim % num_heads:
            raise ValueError(f"MultiheadAttention: embed_dim ({embed_dim}) must be divisible by "
                             f"num_heads ({num_heads})")
        if add_bias_kv or add_zero_attn:
            raise NotImplementedError("MultiheadAttention: add_bias_kv and add_zero_attn are not supported")
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads
        dtype = dtype or _dt.default_float

        def param(*shape):
            return Parameter(empty(*shape, dtype=dtype, device=device))

        if self._qkv_same_embed_dim:
            self.in_proj_weight = param(3 * embed_dim, embed_dim)
            for name in ("q_proj_weight", "k_proj_weight", "v_proj_weight"):
                self.register_parameter(name, None)
        else:
            self.q_proj_weight = param(embed_dim, embed_dim)
            self.k_proj_weight = param(embed_dim, self.kdim)
            self.v_proj_weight = param(embed_dim, self.vdim)
            self.register_parameter("in_proj_weight", None)
        self.register_parameter("in_proj_bias", param(3 * embed_dim) if bias else None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias, device=device, dtype=dtype)
        self.bias_k = self.bias_v = None
        self.add_zero_attn = False
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            init.xavier_uniform_(self.q_proj_weight)
            init.xavier_uniform_(self.k_proj_weight)
            init.xavier_uniform_(self.v_proj_weight)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)

    def forward(self, query, key, value, key_padding_mask=None, need_weights: bool = True, attn_mask=None,
                average_attn_weights: bool = True, is_causal: bool = False):
        """(output, weights); weights are None unless ``need_weights``."""
        batched = query.ndim == 3
        if self.batch_first and batched:
            # keep identities: self-attention is detected by ``query is key is value``
            if key is value:
                if query is key:
                    query = key = value = transpose(query, 1, 0)
                else:
                    query, key = transpose(query, 1, 0), transpose(key, 1, 0)
                    value = key
            else:
                query, key, value = (transpose(x, 1, 0) for x in (query, key, value))
        separate = not self._qkv_same_embed_dim
        out, weights = multi_head_attention_forward(
            query, key, value, self.embed_dim, self.num_heads, self.in_proj_weight, self.in_proj_bias,
            None, None, False, self.dropout, self.out_proj.weight, self.out_proj.bias,
            training=self.training, key_padding_mask=key_padding_mask, need_weights=need_weights,
            attn_mask=attn_mask, use_separate_proj_weight=separate, q_proj_weight=self.q_proj_weight,
            k_proj_weight=self.k_proj_weight, v_proj_weight=self.v_proj_weight,
            average_attn_weights=average_attn_weights, is_causal=is_causal)
        if self.batch_first and batched:
            out = transpose(out, 1, 0)
        return out, weights

    def extra_repr(self) -> str:
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, batch_first={self.batch_first}"


def _activation_fn(activation):
    if isinstance(activation, str):
        if activation == "relu":
            return relu
        if activation == "gelu":
            return gelu
        raise RuntimeError(f"activation should be relu/gelu, not {activation}")
    return activation


def _is_causal_mask(mask, size: int) -> bool:
    """Whether ``mask`` is the square causal mask (−inf, or True, above the diagonal).

    A host-side check of the values (as PyTorch's), so it dispatches no ops; a meta mask is
    detected only when it carries its (small, constant) value.
    """
    if mask is None or mask.data is None or tuple(mask.shape) != (size, size):
        return False
    # a meta tensor may carry a small constant value; read it without the meta backend
    values = mask.data.get() if hasattr(mask.data, "get") else np.asarray(mask.data)
    expected = np.triu(np.full((size, size), -np.inf), 1).astype(mask.dtype.np)
    return bool((values == expected).all())


def _seq_len(x, batch_first: bool) -> int:
    if x.ndim == 2:  # unbatched (S, E)
        return x.shape[0]
    return x.shape[1 if batch_first else 0]


class _TransformerLayer(Module):
    """What the encoder and decoder layers share: self-attention, optionally attention over the
    encoder's ``memory`` (``cross_attention``), and a feed-forward block, each followed by
    dropout and wrapped in a residual with a LayerNorm (after the sum, or before the block with
    ``norm_first``). Submodules are registered in PyTorch's order."""

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int, dropout: float, activation,
                 layer_norm_eps: float, batch_first: bool, norm_first: bool, bias: bool, device, dtype,
                 cross_attention: bool):
        super().__init__()
        kw = {"device": device, "dtype": dtype}

        def attention():
            return MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first, **kw)

        def norm():
            return LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)

        self.self_attn = attention()
        if cross_attention:
            self.multihead_attn = attention()
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **kw)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **kw)
        self.norm_first = norm_first
        self.norm1 = norm()
        self.norm2 = norm()
        if cross_attention:
            self.norm3 = norm()
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        if cross_attention:
            self.dropout3 = Dropout(dropout)
        self.activation = _activation_fn(activation)

    def _residual(self, x, norm, block):
        """x plus ``block``'s output, with ``norm`` before the block (norm_first) or after the sum."""
        if self.norm_first:
            return x + block(norm(x))
        return norm(x + block(x))

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                           need_weights=False, is_causal=is_causal)[0]
        return self.dropout1(x)

    def _ff_block(self, x, dropout):
        return dropout(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerEncoderLayer(_TransformerLayer):
    """Self-attention and a feed-forward block, each with a residual and a LayerNorm (after the
    block, or before it with ``norm_first``)."""

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation="relu", layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, device=None, dtype=None):
        super().__init__(d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps, batch_first,
                         norm_first, bias, device, dtype, cross_attention=False)

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal: bool = False):
        x = self._residual(src, self.norm1,
                           lambda y: self._sa_block(y, src_mask, src_key_padding_mask, is_causal))
        return self._residual(x, self.norm2, lambda y: self._ff_block(y, self.dropout2))


class TransformerDecoderLayer(_TransformerLayer):
    """Self-attention, attention over the encoder's ``memory`` and a feed-forward block, each with
    a residual and a LayerNorm (after the block, or before it with ``norm_first``)."""

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation="relu", layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, device=None, dtype=None):
        super().__init__(d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps, batch_first,
                         norm_first, bias, device, dtype, cross_attention=True)

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal: bool = False, memory_is_causal: bool = False):
        x = self._residual(tgt, self.norm1,
                           lambda y: self._sa_block(y, tgt_mask, tgt_key_padding_mask, tgt_is_causal))
        x = self._residual(x, self.norm2,
                           lambda y: self._mha_block(y, memory, memory_mask, memory_key_padding_mask,
                                                     memory_is_causal))
        return self._residual(x, self.norm3, lambda y: self._ff_block(y, self.dropout3))

    def _mha_block(self, x, mem, attn_mask, key_padding_mask, is_causal):
        x = self.multihead_attn(x, mem, mem, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                                is_causal=is_causal, need_weights=False)[0]
        return self.dropout2(x)


def _clones(module: Module, n: int) -> ModuleList:
    # independent copies with the same initial weights, as PyTorch's _get_clones
    return ModuleList([copy.deepcopy(module) for _ in range(n)])


class _LayerStack(Module):
    """``num_layers`` copies of a layer and an optional final ``norm``; a mask equal to the square
    causal mask counts as causal when the caller leaves ``is_causal`` None, as in PyTorch."""

    def __init__(self, layer: Module, num_layers: int, norm: Module | None):
        super().__init__()
        self.layers = _clones(layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm

    def _is_causal(self, is_causal: bool | None, mask, x) -> bool:
        if is_causal is not None:
            return bool(is_causal)
        batch_first = self.layers[0].self_attn.batch_first if len(self.layers) else False
        return _is_causal_mask(mask, _seq_len(x, batch_first))

    def _final_norm(self, out):
        return self.norm(out) if self.norm is not None else out


class TransformerEncoder(_LayerStack):
    """``num_layers`` copies of ``encoder_layer`` and an optional final ``norm``.

    ``enable_nested_tensor`` and ``mask_check`` are accepted for compatibility (no nested
    tensors here). A ``mask`` equal to the square causal mask is detected when ``is_causal`` is
    None, as in PyTorch.
    """

    def __init__(self, encoder_layer: Module, num_layers: int, norm: Module | None = None,
                 enable_nested_tensor: bool = True, mask_check: bool = True):
        super().__init__(encoder_layer, num_layers, norm)

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal: bool | None = None):
        causal = self._is_causal(is_causal, mask, src)
        out = src
        for layer in self.layers:
            out = layer(out, src_mask=mask, is_causal=causal, src_key_padding_mask=src_key_padding_mask)
        return self._final_norm(out)


class TransformerDecoder(_LayerStack):
    """``num_layers`` copies of ``decoder_layer`` and an optional final ``norm``."""

    def __init__(self, decoder_layer: Module, num_layers: int, norm: Module | None = None):
        super().__init__(decoder_layer, num_layers, norm)

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal: bool | None = None,
                memory_is_causal: bool = False):
        causal = self._is_causal(tgt_is_causal, tgt_mask, tgt)
        out = tgt
        for layer in self.layers:
            out = layer(out, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                        tgt_key_padding_mask=tgt_key_padding_mask,
                        memory_key_padding_mask=memory_key_padding_mask,
                        tgt_is_causal=causal, memory_is_causal=memory_is_causal)
        return self._final_norm(out)


class Transformer(Module):
    """The encoder-decoder Transformer of "Attention Is All You Need" (torch.nn.Transformer):
    encoder and decoder stacks with a final LayerNorm each; matrices Xavier-initialized."""

    def __init__(self, d_model: int = 512, nhead: int = 8, num_encoder_layers: int = 6,
                 num_decoder_layers: int = 6, dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation="relu", custom_encoder: Module | None = None,
                 custom_decoder: Module | None = None, layer_norm_eps: float = 1e-5,
                 batch_first: bool = False, norm_first: bool = False, bias: bool = True,
                 device=None, dtype=None):
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        layer_args = (d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps, batch_first,
                      norm_first, bias)
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            self.encoder = TransformerEncoder(TransformerEncoderLayer(*layer_args, **kw), num_encoder_layers,
                                              LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw))
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            self.decoder = TransformerDecoder(TransformerDecoderLayer(*layer_args, **kw), num_decoder_layers,
                                              LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw))
        for p in self.parameters():
            if p.ndim > 1:
                init.xavier_uniform_(p)
        self.d_model, self.nhead, self.batch_first = d_model, nhead, batch_first

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None, src_key_padding_mask=None,
                tgt_key_padding_mask=None, memory_key_padding_mask=None, src_is_causal: bool | None = None,
                tgt_is_causal: bool | None = None, memory_is_causal: bool = False):
        batch_dim = 0 if self.batch_first else 1
        if src.ndim == 3 and src.shape[batch_dim] != tgt.shape[batch_dim]:
            raise ShapeError(f"Transformer: the batch sizes of src {src.shape} and tgt {tgt.shape} must be equal")
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise ShapeError(f"Transformer: the feature size of src {src.shape} and tgt {tgt.shape} must be "
                             f"d_model ({self.d_model})")
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask, is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask, tgt_is_causal=tgt_is_causal,
                            memory_is_causal=memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz: int, device=None, dtype=None):
        """A float (sz, sz) mask: −inf above the diagonal, 0 elsewhere."""
        from ...tensor import tensor

        return tensor(np.triu(np.full((sz, sz), -math.inf), 1), dtype=dtype or _dt.default_float, device=device)
