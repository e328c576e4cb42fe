"""Hugging Face model folders: ``config.json``, optionally ``*.safetensors`` (one file, or shards
listed in ``model.safetensors.index.json``).

* An architecture the zoo builds natively (``_hf_architectures.py``) is built from
  ``config.json`` with flopcount's layers: on the meta device for counting (no weight read; the
  parameters take the checkpoint's dtype), or with the weights mapped from the safetensors
  files (read-only views of the files, dtype kept) to run it.
* Any other architecture is built by transformers from the same ``config.json`` (on torch's
  meta device for counting, or with its weights) and goes through the PyTorch path. Without
  torch and transformers, one line names the architecture and the natively built ones.

Nothing in the folder is executed: ``config.json`` is read as JSON, weights only from
safetensors (a folder holding only ``pytorch_model.bin``, a pickle, is refused), and a config
asking for the model's own code (``auto_map``) is refused.

    folder = load("bert-base-uncased/", weights=False)
    folder.model, folder.inputs      # BertForMaskedLM on meta, [("input_ids", (128,), "int64", 30522)]
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from .. import runtime as rt
from ..runtime import errors
from ..runtime.device import CPU
from ..runtime.dtypes import get_dtype
from ..runtime.factories import empty
from ..runtime.io.files import open_model_file
from ..runtime.io.json_text import parse_json
from ..runtime.io.mapped import map_tensors
from ._hf_architectures import ARCHITECTURES, IMAGE, TEXT, NotNative, names

SEQUENCE_LENGTH = 128          # the default number of tokens of a text model's input
INDEX_FILE = "model.safetensors.index.json"
HF_INSTALL = "pip install 'flopcount[hf]'"


@dataclass
class Folder:
    """What a folder gives: the model (a flopcount Module, or a torch module for the PyTorch
    path), its architecture name, its default inputs as (name, shape without batch, dtype,
    high), whether it is a torch module, and notes for the user."""

    model: object
    architecture: str
    inputs: list
    torch: bool = False
    notes: list = field(default_factory=list)


def is_folder(path: str) -> bool:
    """Whether ``path`` is a directory with a ``config.json``."""
    return os.path.isdir(path) and os.path.exists(os.path.join(path, "config.json"))


def read_config(folder: str) -> dict:
    path = os.path.join(folder, "config.json")
    try:
        with open_model_file(path, encoding="utf-8") as f:
            data = parse_json(f.read())
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise errors.ModelFileError(f"{path}: not a readable JSON config ({type(exc).__name__}: {exc})") from None
    if not isinstance(data, dict):
        raise errors.ModelFileError(f"{path}: the config is not a JSON object")
    return data


def architecture_of(folder: str, data: dict) -> str:
    names_ = data.get("architectures")
    if isinstance(names_, list) and names_ and isinstance(names_[0], str):
        return names_[0]
    raise errors.ModelFileError(f"{os.path.join(folder, 'config.json')}: names no architecture "
                                f"(\"architectures\": [...], written by save_pretrained)")


def default_inputs(data: dict, kind: str, dtype: str = "float32") -> list:
    """Token ids (1 x 128, below the vocabulary size) or an image (channels x size x size)."""
    if kind == TEXT:
        return [("input_ids", (SEQUENCE_LENGTH,), "int64", data.get("vocab_size"))]
    size = data.get("image_size", 224)
    size = size[0] if isinstance(size, (list, tuple)) else size
    return [("pixel_values", (data.get("num_channels", 3), size, size), dtype, None)]


def _input_kind(data: dict) -> str:
    if "vocab_size" in data:
        return TEXT
    if "image_size" in data:
        return IMAGE
    return TEXT


def _checkpoint_dtype(data: dict):
    """The dtype the weights were saved in (``dtype``, or 4.x's ``torch_dtype``), when it is one."""
    name = data.get("dtype") or data.get("torch_dtype")
    try:
        return get_dtype(name) if isinstance(name, str) else None
    except TypeError:
        return None


# --- weights -------------------------------------------------------------------------------------

def weight_files(folder: str) -> list:
    """The folder's safetensors files (the shards an index lists, or every ``*.safetensors``)."""
    index = os.path.join(folder, INDEX_FILE)
    if os.path.isfile(index):
        try:
            with open_model_file(index, encoding="utf-8") as f:
                weight_map = parse_json(f.read())["weight_map"]
            shards = sorted(set(weight_map.values()))
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise errors.ModelFileError(f"{index}: not a readable shard index ({type(exc).__name__}: {exc})") \
                from None
        missing = [s for s in shards if not os.path.isfile(os.path.join(folder, s))]
        if missing:
            raise errors.ModelFileError(f"{index} lists {missing[0]}, which is not in the folder")
        return [os.path.join(folder, s) for s in shards]
    return sorted(os.path.join(folder, n) for n in os.listdir(folder) if n.endswith(".safetensors"))


def _no_weights(folder: str) -> str:
    pickles = sorted(n for n in os.listdir(folder) if n.endswith((".bin", ".pt", ".pth", ".ckpt")))
    if pickles:
        return (f"{folder}: its weights are only in {pickles[0]}, a pickle, which flopcount never unpickles "
                f"(unpickling can run code); save them as safetensors (save_pretrained(..., "
                f"safe_serialization=True)), or count without weights")
    return f"{folder}: no *.safetensors weights in the folder"


def load_weights(model, folder: str, renames: tuple = (), regroup=None) -> None:
    """Fill ``model``'s parameters (in place, every name a tied parameter has) with the
    folder's tensors, mapped from the files, in the dtype they were saved in. ``regroup`` (an
    architecture's: {name: array} -> {name: array}, on the checkpoint's names) and then
    ``renames`` turn the checkpoint's tensors and names into the model's."""
    files = weight_files(folder)
    if not files:
        raise errors.ModelFileError(_no_weights(folder))
    tensors = {}
    for path in files:
        tensors.update(map_tensors(path))
    if regroup is not None:
        try:
            tensors = regroup(tensors)
        except ValueError as exc:
            raise errors.ModelFileError(f"{folder}: {exc}") from None
    for pattern, replacement in renames:
        tensors = {re.sub(pattern, replacement, name): array for name, array in tensors.items()}
    owners: dict = {}
    for name, param in model.named_parameters(remove_duplicate=False):
        owners.setdefault(id(param), (param, []))[1].append(name)
    for param, found_names in owners.values():
        name = next((n for n in found_names if n in tensors), None)
        if name is None:
            raise errors.ModelFileError(f"{folder}: the weights have no {found_names[0]!r} (of shape "
                                        f"{tuple(param.shape)}) for this architecture")
        array = tensors[name]
        if tuple(array.shape) != tuple(param.shape):
            raise errors.ModelFileError(f"{folder}: {name!r} has shape {tuple(array.shape)} in the weights, the "
                                        f"architecture needs {tuple(param.shape)}")
        param.data, param.dtype, param.device = array, get_dtype(array.dtype), CPU
    for name, buffer in model.named_buffers():   # derived buffers (position ids) were made on meta
        if buffer.data is None:
            raise errors.ModelFileError(f"{folder}: a buffer of shape {buffer.shape} has no data")
        stored = tensors.get(name)
        if stored is not None and tuple(stored.shape) == tuple(buffer.shape):   # state a checkpoint keeps
            buffer.data, buffer.dtype = stored, get_dtype(stored.dtype)


# --- building --------------------------------------------------------------------------------------

def load(folder: str, weights: bool) -> Folder:
    """The model of a Hugging Face folder: natively built when its architecture is in the zoo's
    table, else through transformers and the PyTorch path. ``weights``: read them (to run the
    model), else build on the meta device (to count)."""
    data = read_config(folder)
    name = architecture_of(folder, data)
    arch = ARCHITECTURES.get(name)
    reason = None
    if arch is not None:
        try:
            config = arch.config_from(data)
        except NotNative as exc:
            reason = f"its config sets {exc}, which flopcount's {name} does not implement"
        else:
            return _native(folder, data, arch, config, weights)
    return _through_torch(folder, data, name, weights, reason)


def _native(folder: str, data: dict, arch, config, weights: bool) -> Folder:
    dtype = _checkpoint_dtype(data)
    notes = []
    if weights and not weight_files(folder):
        notes.append(_no_weights(folder) + ": counted on the meta device, not run")
        weights = False
    if weights:
        with rt.meta():
            model = arch.model(config)
        materialize_buffers(model)
        load_weights(model, folder, arch.renames, arch.regroup)
    else:
        with rt.meta():
            model = arch.model(config)
            if dtype is not None and dtype is not rt.float32:
                model.to(dtype)   # the checkpoint's dtype: parameter memory as the weights take it
    pixel_dtype = next((p.dtype.name for p in model.parameters()), "float32")
    return Folder(model.eval(), arch.name, default_inputs(data, arch.inputs, pixel_dtype), notes=notes)


def materialize_buffers(model) -> None:
    """Derived buffers (position ids...) of a model built on meta, made on the CPU: the
    parameters come from the weights, these from the code (``reset_buffers``)."""
    for module in model.modules():
        for buffer in module._buffers.values():
            if buffer is not None and buffer.device.type == "meta":
                fresh = empty(*buffer.shape, dtype=buffer.dtype, device="cpu")
                buffer.data, buffer.device = fresh.data, fresh.device
        if hasattr(module, "reset_buffers"):
            module.reset_buffers()


def load_with_transformers(folder: str, weights: bool, why: str = "transformers' own model was asked for") -> Folder:
    """The folder's model as transformers builds it, natively built architectures too."""
    data = read_config(folder)
    return _through_torch(folder, data, architecture_of(folder, data), weights, why)


def _through_torch(folder: str, data: dict, name: str, weights: bool, reason: str | None) -> Folder:
    why = reason or "the zoo does not build it natively"
    supported = ", ".join(names())
    from ..runtime.torch.environment import import_transformers

    try:
        import torch
        transformers = import_transformers()
    except ImportError:
        raise errors.UnsupportedOpError(
            f"{folder}: architecture {name} ({why}) needs the PyTorch path: {HF_INSTALL}; natively built: "
            f"{supported}") from None
    if data.get("auto_map"):
        raise errors.UnsupportedOpError(f"{folder}: {name} needs the model's own Python code (auto_map, "
                                        f"trust_remote_code), which flopcount never runs; it was not run")
    model_type = data.get("model_type")
    known = getattr(getattr(transformers, "CONFIG_MAPPING", None), "keys", lambda: None)()
    if known is not None and model_type not in known:
        raise errors.ModelFileError(f"{folder}: unknown model_type {model_type!r}: transformers "
                                    f"{transformers.__version__} has no such architecture (a newer release may)")
    try:
        config = transformers.AutoConfig.from_pretrained(folder)
        config.use_cache = False   # a forward without a KV cache: the graph of one call
        cls = getattr(transformers, name, None)
        if cls is None:
            raise errors.UnsupportedOpError(f"{folder}: transformers {transformers.__version__} has no class {name}")
        files = weight_files(folder)
        if weights and files:
            model = cls.from_pretrained(folder, config=config, use_safetensors=True)
        else:
            with torch.device("meta"):
                model = cls._from_config(config)
    except errors.FlopcountError:
        raise
    except Exception as exc:  # transformers' own errors (and torchvision's import failure) in one line
        text = " ".join(str(exc).split())[:300]
        raise errors.ModelFileError(f"{folder}: transformers could not build {name} ({type(exc).__name__}: "
                                    f"{text})") from None
    notes = [f"{name} is not built natively ({why}): counted through the PyTorch path"]
    if weights and not files:
        notes.append(_no_weights(folder) + ": counted on the meta device, not run")
    kind = _input_kind(data)
    return Folder(model.eval(), name, default_inputs(data, kind), torch=True, notes=notes)


__all__ = ["Folder", "is_folder", "load", "load_weights", "read_config", "weight_files", "SEQUENCE_LENGTH"]
