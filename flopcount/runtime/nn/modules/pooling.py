"""MaxPool/AvgPool 1d/2d/3d and the adaptive pools."""

from __future__ import annotations

__all__: list = []
