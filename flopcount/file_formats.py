"""Model files that a frontend reads and knows by their content: GGUF, TensorFlow Lite and
Keras 3, one :class:`FileFormat` each in ``FORMATS``. ``loading.load_native`` asks each format
in turn whether a file is one of it (whatever its name), and refuses in one line a file that
bears a format's suffix without its signature.

Adding a file format is its reader (a runtime package, or a ``models/_<format>_file.py`` that
builds the model natively) and its entry here: the sniffer, the Target kinds and ``loading.py``
stay as they are.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable

from .runtime.io.files import open_model_file
from .target import Target, built_target, graph_file_target, naming_errors


@dataclass(frozen=True)
class FileFormat:
    """One format: ``kind`` (the Target's kind), ``name`` (``"a GGUF file"``), ``suffix`` and
    ``signature`` (a file named ``*suffix`` that is not one is refused: "not a GGUF file (it does
    not start with 'GGUF')"; no suffix: no refusal by name), ``recognises(path)`` (reads a few
    bytes or an archive's listing, never runs anything) and ``load(path, device, zoo_device)``."""

    kind: str
    name: str
    suffix: str | None
    signature: str
    recognises: Callable[[str], bool]
    load: Callable[..., Target]


def _load_gguf(path: str, device, zoo_device=None) -> Target:
    """Its decoder built natively (``models/_gguf_file.py``): on meta to count (header and tensor
    table only), its weights mapped from the file otherwise."""
    from .models import _gguf_file

    device = zoo_device or device
    return built_target(_gguf_file.load(path, weights=str(device) != "meta"), os.path.basename(path), "gguf", path)


def _is_gguf(path: str) -> bool:
    from .runtime import gguf

    return gguf.is_gguf(path)


def _is_tflite(path: str) -> bool:
    from .runtime import tflite

    with open_model_file(path) as f:
        return tflite.is_tflite(f.read(8))


def _load_tflite(path: str, device, zoo_device=None) -> Target:
    """Imported from its flatbuffer (fixed NHWC shapes, as the file declares them); on the meta
    device no arrays are made for its weights."""
    from .runtime import tflite

    with naming_errors(path):
        graph = tflite.load(path, device="meta" if str(device) == "meta" else None)
    return graph_file_target(graph, path, "tflite", device)


def _is_keras(path: str) -> bool:
    from .models import _keras_file

    return _keras_file.is_keras(path)


def _load_keras(path: str, device, zoo_device=None) -> Target:
    """Rebuilt from its config (``models/_keras_file.py``, Keras never imported): on meta to
    count, with its weights to run; its default inputs are its InputLayers' with batch 1."""
    from .models import _keras_file

    device = zoo_device or device
    loaded = _keras_file.load(path, weights=str(device) != "meta")
    target = built_target(loaded, os.path.basename(path), "keras", path)
    if str(device) == "meta":
        target.device = "meta"
    elif str(device) != "cpu":
        loaded.model.to(device)   # the weights were read on the CPU
    return target


FORMATS = (
    FileFormat("gguf", "a GGUF file", ".gguf", "it does not start with 'GGUF'", _is_gguf, _load_gguf),
    FileFormat("tflite", "a TensorFlow Lite file", ".tflite", "no 'TFL3' identifier at bytes 4..8", _is_tflite,
               _load_tflite),
    # a .keras name on another zip gets the zip's own message, which says what a Keras file holds
    FileFormat("keras", "a Keras 3 file", None, "", _is_keras, _load_keras),
)

__all__ = ["FileFormat", "FORMATS"]
