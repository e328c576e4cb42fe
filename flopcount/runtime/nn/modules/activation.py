"""Activation modules, Softmax and LogSoftmax."""

from __future__ import annotations

__all__: list = []
