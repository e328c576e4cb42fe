"""Losses: cross_entropy, nll_loss, mse_loss."""

from __future__ import annotations

__all__: list = []  # the functional API (nn.functional re-exports it)
