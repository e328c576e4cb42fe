"""scaled_dot_product_attention (mask, causal, dropout)."""

from __future__ import annotations

__all__: list = []  # the functional API (nn.functional re-exports it)
