"""Make the PyTorch ecosystem importable for the tests, whatever torchvision build is installed.

The registry's torchvision wheels are CUDA builds. Next to a CPU build of torch their compiled
ops (``torchvision/_C.so``) do not load, and ``import torchvision`` then fails in
``torchvision/_meta_registrations.py``, which registers fake kernels for ``torchvision::nms``
and ``torchvision::qnms`` unconditionally ("operator torchvision::nms does not exist").
transformers imports torchvision when it is installed, so it fails the same way.

The tests need only torchvision's model definitions, which are pure Python. ``prepare()`` first
loads torchvision's own ``_C`` library, as ``import torchvision`` would; only when that fails does
it declare the two op schemas, so the import goes through and the models build. Calling
``torchvision.ops.nms`` then raises (no kernel), which no test does. With a torchvision build that
matches torch, nothing is changed.
"""

from __future__ import annotations

import importlib.util
import os

_NMS_SCHEMAS = ("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
                "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
_library = None  # keeps the schema declarations alive


def prepare() -> None:
    """Idempotent; does nothing when torch or torchvision is absent."""
    global _library
    if _library is not None or importlib.util.find_spec("torch") is None:
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
