"""BatchNorm1d/2d/3d, LayerNorm, GroupNorm, InstanceNorm1d/2d/3d, RMSNorm."""

from __future__ import annotations

__all__: list = []
