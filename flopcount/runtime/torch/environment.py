"""Make transformers importable beside a CPU build of torch and PyPI's torchvision.

PyPI's torchvision wheels are CUDA builds. Next to a CPU build of torch (the one the project's
test extra pins, and the one many laptops have) their compiled ops (``torchvision/_C.so``) do
not load, and ``import torchvision`` then fails in ``torchvision/_meta_registrations.py``, which
registers fake kernels for ``torchvision::nms`` and ``torchvision::qnms`` unconditionally
("operator torchvision::nms does not exist"). transformers imports torchvision whenever it is
installed, so every model class it builds fails the same way, whatever the model.

flopcount needs neither torchvision's kernels nor its transforms; it needs the import to go
through. ``prepare()`` first loads torchvision's own ``_C`` library, as ``import torchvision``
would; only when that fails does it declare the two op schemas, so the import goes through.
Calling ``torchvision.ops.nms`` then raises (no kernel), which flopcount never does. With a
torchvision build that matches torch, or without torchvision, nothing is changed.
"""

from __future__ import annotations

import importlib.util
import os
import sys

_NMS_SCHEMAS = ("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
                "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
_library = None  # keeps the schema declarations alive


def prepare() -> None:
    """Idempotent; does nothing when torch or torchvision is absent, or torchvision is imported."""
    global _library
    if _library is not None or "torchvision" in sys.modules or importlib.util.find_spec("torch") is None:
        return
    spec = importlib.util.find_spec("torchvision")
    if spec is None or not spec.submodule_search_locations:
        return
    import torch

    compiled = os.path.join(spec.submodule_search_locations[0], "_C.so")
    try:
        torch.ops.load_library(compiled)
        _library = "loaded"
    except (OSError, RuntimeError):
        _library = torch.library.Library("torchvision", "DEF")
        for schema in _NMS_SCHEMAS:
            _library.define(schema)


def import_transformers():
    """``transformers``, imported after :func:`prepare`; ImportError when it is not installed."""
    prepare()
    import transformers

    return transformers


__all__ = ["prepare", "import_transformers"]
