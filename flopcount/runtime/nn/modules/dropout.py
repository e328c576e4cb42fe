"""Dropout layers: active in training mode, the identity in evaluation mode."""

from __future__ import annotations

from ...ops import dropout as D
from .module import Module

__all__ = ["Dropout", "Dropout1d", "Dropout2d", "Dropout3d"]


class _DropoutNd(Module):
    def __init__(self, p: float = 0.5, inplace: bool = False):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p
        self.inplace = inplace

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class Dropout(_DropoutNd):
    """Zero each element with probability ``p`` in training and scale the rest by 1 / (1 − p).

    >>> m = Dropout(0.5).eval()
    >>> m(x) is x   # doctest: +SKIP
    True
    """

    def forward(self, input):
        return D.dropout(input, self.p, self.training)


class Dropout1d(_DropoutNd):
    """Zero whole channels of (N, C, L) or (C, L) input in training."""

    def forward(self, input):
        return D.dropout1d(input, self.p, self.training)


class Dropout2d(_DropoutNd):
    """Zero whole channels of (N, C, H, W) input in training."""

    def forward(self, input):
        return D.dropout2d(input, self.p, self.training)


class Dropout3d(_DropoutNd):
    """Zero whole channels of (N, C, D, H, W) or (C, D, H, W) input in training."""

    def forward(self, input):
        return D.dropout3d(input, self.p, self.training)
