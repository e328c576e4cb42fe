"""Normalizations: batch, layer, group, instance and RMS norm."""

from __future__ import annotations

__all__: list = []  # the functional API (nn.functional re-exports it)
