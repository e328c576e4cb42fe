"""Upsampling (nearest, bilinear) and interpolate."""

from __future__ import annotations

__all__: list = []  # the functional API (nn.functional re-exports it)
