"""Fused attention kept whole in a recorded run.

``torch.nn.functional.scaled_dot_product_attention`` is one op to a serving engine (a flash
kernel reads each key and value once and never stores the scores). Recorded at the ATen level
on the meta device it is not: torch decomposes it into its math (the scores, a causal mask
built with ``ones``/``tril``/``where``, softmax, two batched matmuls), and with every layer
building its own mask from constants, a long prompt's masks fill memory as the importer folds
them. Inside ``whole_attention()``, a ``TorchFunctionMode`` sends each call to
``flopcount::attention`` instead, an operator with the same signature and result (its kernel
is torch's function), which the recorder sees as one op and the importer converts into the
runtime's ``scaled_dot_product_attention``.

    with whole_attention():
        ... run the model under the recorder ...
"""

from __future__ import annotations

import contextlib

_LIBRARY = None   # keeps the operator's definition alive


def attention_op():
    """``torch.ops.flopcount.attention.default``, defined on first use."""
    global _LIBRARY
    import torch

    if _LIBRARY is None:
        library = torch.library.Library("flopcount", "FRAGMENT")
        library.define("attention(Tensor query, Tensor key, Tensor value, Tensor? attn_mask=None, "
                       "float dropout_p=0.0, bool is_causal=False, float? scale=None, bool enable_gqa=False) "
                       "-> Tensor")

        def kernel(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
            with torch._C.DisableTorchFunction():
                return torch.nn.functional.scaled_dot_product_attention(
                    query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal, scale=scale,
                    enable_gqa=enable_gqa)

        library.impl("attention", kernel, "CompositeExplicitAutograd")
        _LIBRARY = library
    return torch.ops.flopcount.attention.default


@contextlib.contextmanager
def whole_attention():
    """Calls of ``scaled_dot_product_attention`` inside the block go to ``flopcount::attention``."""
    import torch
    from torch.overrides import TorchFunctionMode

    op = attention_op()
    sdpa = torch.nn.functional.scaled_dot_product_attention

    class WholeAttention(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if func is sdpa:
                return op(*args, **kwargs)
            return func(*args, **kwargs)

    with WholeAttention():
        yield


__all__ = ["attention_op", "whole_attention"]
