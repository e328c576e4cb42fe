"""Loss modules: thin wrappers over the functionals in ``ops/loss.py``.

Class weights (and BCEWithLogitsLoss's ``pos_weight``) are buffers, as in PyTorch, so they move
with ``.to()`` and appear in the state dict.
"""

from __future__ import annotations

from ...ops import loss as L
from .module import Module

__all__ = ["CrossEntropyLoss", "NLLLoss", "MSELoss", "L1Loss", "SmoothL1Loss", "HuberLoss", "BCELoss",
           "BCEWithLogitsLoss"]


class _Loss(Module):
    def __init__(self, size_average=None, reduce=None, reduction: str = "mean"):
        super().__init__()
        self.reduction = L.legacy_reduction(size_average, reduce, reduction)

    def extra_repr(self) -> str:
        return f"reduction={self.reduction!r}" if self.reduction != "mean" else ""


class _WeightedLoss(_Loss):
    def __init__(self, weight=None, size_average=None, reduce=None, reduction: str = "mean"):
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)


class CrossEntropyLoss(_WeightedLoss):
    """Cross entropy of logits with class indices or class probabilities.

    >>> round(CrossEntropyLoss()(rt.tensor([[0.0, 0.0]]), rt.tensor([1])).item(), 4)
    0.6931
    """

    def __init__(self, weight=None, size_average=None, ignore_index: int = -100, reduce=None,
                 reduction: str = "mean", label_smoothing: float = 0.0):
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing

    def forward(self, input, target):
        return L.cross_entropy(input, target, self.weight, ignore_index=self.ignore_index,
                               reduction=self.reduction, label_smoothing=self.label_smoothing)


class NLLLoss(_WeightedLoss):
    """Negative log likelihood of log-probabilities at the target classes."""

    def __init__(self, weight=None, size_average=None, ignore_index: int = -100, reduce=None,
                 reduction: str = "mean"):
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index

    def forward(self, input, target):
        return L.nll_loss(input, target, self.weight, ignore_index=self.ignore_index, reduction=self.reduction)


class MSELoss(_Loss):
    """Mean squared error."""

    def forward(self, input, target):
        return L.mse_loss(input, target, reduction=self.reduction)


class L1Loss(_Loss):
    """Mean absolute error."""

    def forward(self, input, target):
        return L.l1_loss(input, target, reduction=self.reduction)


class SmoothL1Loss(_Loss):
    """Quadratic below ``beta``, linear above."""

    def __init__(self, size_average=None, reduce=None, reduction: str = "mean", beta: float = 1.0):
        super().__init__(size_average, reduce, reduction)
        self.beta = beta

    def forward(self, input, target):
        return L.smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class HuberLoss(_Loss):
    """Quadratic below ``delta``, delta-scaled linear above."""

    def __init__(self, reduction: str = "mean", delta: float = 1.0):
        super().__init__(reduction=reduction)
        self.delta = delta

    def forward(self, input, target):
        return L.huber_loss(input, target, reduction=self.reduction, delta=self.delta)


class BCELoss(_WeightedLoss):
    """Binary cross entropy of probabilities."""

    def forward(self, input, target):
        return L.binary_cross_entropy(input, target, self.weight, reduction=self.reduction)


class BCEWithLogitsLoss(_Loss):
    """Binary cross entropy of logits (a stable sigmoid + BCE), with optional ``pos_weight``."""

    def __init__(self, weight=None, size_average=None, reduce=None, reduction: str = "mean", pos_weight=None):
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)
        self.register_buffer("pos_weight", pos_weight)

    def forward(self, input, target):
        return L.binary_cross_entropy_with_logits(input, target, self.weight, reduction=self.reduction,
                                                  pos_weight=self.pos_weight)
