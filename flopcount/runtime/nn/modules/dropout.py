"""Dropout layers: active in training mode, the identity in evaluation mode."""

from __future__ import annotations

from ...ops import dropout as D
from ._classes import layer_class
from .module import Module

__all__ = ["Dropout", "Dropout1d", "Dropout2d", "Dropout3d"]


class _DropoutNd(Module):
    _functional = None

    def __init__(self, p: float = 0.5, inplace: bool = False):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p
        self.inplace = inplace

    def forward(self, input):
        return type(self)._functional(input, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


Dropout = layer_class(
    _DropoutNd, "Dropout", D.dropout,
    """Zero each element with probability ``p`` in training and scale the rest by 1 / (1 − p).

    >>> m = Dropout(0.5).eval()
    >>> m(x) is x   # doctest: +SKIP
    True
    """)
Dropout1d = layer_class(_DropoutNd, "Dropout1d", D.dropout1d,
                        "Zero whole channels of (N, C, L) or (C, L) input in training.")
Dropout2d = layer_class(_DropoutNd, "Dropout2d", D.dropout2d, "Zero whole channels of (N, C, H, W) input in training.")
Dropout3d = layer_class(_DropoutNd, "Dropout3d", D.dropout3d,
                        "Zero whole channels of (N, C, D, H, W) or (C, D, H, W) input in training.")
