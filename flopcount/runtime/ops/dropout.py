"""Dropout (the mask is a second output, so the gradient needs no saved state)."""

from __future__ import annotations

__all__: list = []  # the functional API (nn.functional re-exports it)
