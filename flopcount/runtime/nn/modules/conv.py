"""Conv1d/2d/3d and ConvTranspose1d/2d/3d."""

from __future__ import annotations

__all__: list = []
