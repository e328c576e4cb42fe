"""Loss modules: CrossEntropyLoss, NLLLoss, MSELoss."""

from __future__ import annotations

__all__: list = []
