"""MultiheadAttention, TransformerEncoderLayer, TransformerDecoderLayer (and stacks)."""

from __future__ import annotations

__all__: list = []
