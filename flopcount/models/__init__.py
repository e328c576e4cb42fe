"""The model zoo: reference architectures written in ``flopcount.runtime.nn``.

    from flopcount import models
    models.names()                       # ['alexnet', ..., 'resnet50', ...]
    net = models.get("resnet18")         # PyTorch-style default initialization
    x = models.example_input("resnet18") # a (1, 3, 224, 224) float32 tensor

Every model file registers its models with ``@register_model``; this package imports them all.
"""

from __future__ import annotations

import importlib
import pkgutil

from ._registry import ModelInfo, example_input, get, info, names, register_model

__all__ = ["ModelInfo", "example_input", "get", "info", "names", "register_model"]

for _module in pkgutil.iter_modules(__path__):
    if not _module.name.startswith("_"):
        importlib.import_module(f"{__name__}.{_module.name}")
