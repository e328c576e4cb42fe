"""What kind of file a model file is, from its first bytes (never from its name alone), without
running or unpickling anything.

    sniff("resnet18.pth")       # 'torch-pickle': a torch.save zip with data.pkl in it
    sniff("model.pt2")          # 'pt2': a torch.export.save archive
    sniff("model.safetensors")  # 'safetensors'

Kinds: ``torch-pickle`` (``torch.save``'s zip), ``pickle`` (a raw pickle stream: ``torch.save``
with the legacy format, ``pickle.dump``), ``pt2``, ``safetensors``, ``zip`` (another zip),
``damaged-zip`` (begins as a zip, cannot be read as one: truncated) and ``unknown``. The formats
a frontend reads (GGUF, TensorFlow Lite, Keras 3) are recognised by their own readers, each
named in ``flopcount/file_formats.py``.
"""

from __future__ import annotations

import os
import struct
import zipfile

from .files import open_model_file
from .json_text import parse_json

TORCH_PICKLE, PICKLE, PT2, SAFETENSORS, ZIP, UNKNOWN = "torch-pickle", "pickle", "pt2", "safetensors", "zip", "unknown"
DAMAGED_ZIP = "damaged-zip"

ZIP_MAGIC = b"PK\x03\x04"
_HEADER_LIMIT = 100 << 20   # a safetensors header larger than this is not one


def sniff(path: str) -> str:
    """The kind of the file at ``path`` (see the module docstring)."""
    with open_model_file(path) as f:
        head = f.read(9)
    if head.startswith(ZIP_MAGIC):
        return _zip_kind(path)
    if len(head) >= 2 and head[0] == 0x80 and 2 <= head[1] <= 5:
        return PICKLE   # PROTO opcode with protocol 2..5: how every pickle since Python 2.3 starts
    if len(head) == 9 and head[8:9] == b"{":
        size = struct.unpack("<Q", head[:8])[0]
        if 0 < size <= min(_HEADER_LIMIT, os.path.getsize(path) - 8):
            return SAFETENSORS
    return UNKNOWN


def _zip_kind(path: str) -> str:
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
    except (zipfile.BadZipFile, OSError, EOFError):
        return DAMAGED_ZIP
    if any(n == "data.pkl" or n.endswith("/data.pkl") for n in names):
        return TORCH_PICKLE
    if any(n.endswith("archive_format") for n in names) and any("/models/" in n or n.startswith("models/")
                                                                for n in names):
        return PT2
    return ZIP


def safetensors_metadata(path: str) -> dict:
    """The ``__metadata__`` of a safetensors file's header ({} when it has none)."""
    with open_model_file(path) as f:
        size = struct.unpack("<Q", f.read(8))[0]
        if size > _HEADER_LIMIT:
            return {}
        try:
            header = parse_json(f.read(size))
        except ValueError:
            return {}
    meta = header.get("__metadata__") if isinstance(header, dict) else None
    return meta if isinstance(meta, dict) else {}


__all__ = ["sniff", "safetensors_metadata", "TORCH_PICKLE", "PICKLE", "PT2", "SAFETENSORS", "ZIP", "DAMAGED_ZIP",
           "UNKNOWN", "ZIP_MAGIC"]
