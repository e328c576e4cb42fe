"""Max/avg pooling 1d/2d/3d and adaptive pooling."""

from __future__ import annotations

__all__: list = []  # the functional API (nn.functional re-exports it)
