"""Optimizers: SGD (momentum, nesterov, weight decay), Adam (amsgrad), AdamW, as in torch.optim."""

from .optimizer import Optimizer
from .sgd import SGD
from .adam import Adam, AdamW

__all__ = ["Optimizer", "SGD", "Adam", "AdamW"]
