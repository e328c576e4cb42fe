"""GPT-3 175B (Brown et al., 2020) with the GPT-2 classes of ``gpt2.py``: the same pre-norm
blocks, learned position embeddings and tied LM head, at 96 layers, hidden size 12288, 96
heads and a 2048-token context.

The vocabulary is 51,200: the GPT-2 tokenizer's 50,257 padded to a multiple of 1024, as
Megatron-LM pads it and as the figures this preset is checked against use (Narayanan et al.
2021, whose FLOPs per iteration take V = 51200; a padded vocabulary also splits evenly over
tensor-parallel ranks). With it the model has 174,615,846,912 parameters. Build it on meta:

    >>> import flopcount.runtime as rt
    >>> from flopcount import models
    >>> with rt.meta():
    ...     net = models.get("gpt3_175b")
    >>> net(models.example_input("gpt3_175b", device="meta")).shape
    (1, 2048, 51200)
"""

from __future__ import annotations

from ._registry import register_model, token_input
from ._text import config_from
from .gpt2 import GPT2Config, GPT2LMHeadModel

__all__ = ["GPT3_175B", "gpt3_175b"]

# Brown et al. (2020), table 2.1: n_layers, d_model, n_heads; n_ctx = 2048
GPT3_175B = dict(n_layer=96, n_embd=12288, n_head=96, n_positions=2048, vocab_size=51200)


def _param_count(n_layer: int, n_embd: int, n_positions: int, vocab_size: int, **_) -> int:
    """12·L·h² + 13·L·h (four h x h matrices in attention, two h x 4h in the MLP, their
    biases and the two layer norms per block) + the token and position tables + the final
    layer norm; the LM head is the token table."""
    return 12 * n_layer * n_embd ** 2 + 13 * n_layer * n_embd + (vocab_size + n_positions) * n_embd + 2 * n_embd


@register_model("gpt3_175b", family="gpt2", inputs=token_input(2048, GPT3_175B["vocab_size"]),
                params=_param_count(**GPT3_175B),
                description="GPT-3 175B (GPT-2 blocks, 96 x 12288, vocabulary padded to 51200; build it on meta)",
                **GPT3_175B)
def gpt3_175b(**config) -> GPT2LMHeadModel:
    """GPT-3 175B; keyword arguments override ``GPT2Config`` fields."""
    return GPT2LMHeadModel(config_from(GPT2Config, config))
