"""``torch.export.save`` archives (``.pt2``) read without unpickling anything.

``torch.export.load`` unpickles (the sample inputs, and weights in older layouts). This reader
takes the parts of the archive that are data: the program as JSON (``models/model.json``,
deserialized by torch's own schema code), and each weight from its raw bytes as the JSON
payload config describes it. A weight or constant stored as a pickle is refused, naming it;
the sample inputs are not read at all. For counting (``device="meta"``) no weight bytes are
read: each becomes a meta tensor of the recorded shape and dtype.

An archive exported with dynamic dims is bound to concrete shapes (``input_shapes``) by
exporting the program's module again on inputs of those shapes.
"""

from __future__ import annotations

import os

from ..errors import FlopcountError, ModelFileError
from ..io import sniff
from .capture import from_program, quiet_export, require_torch


def _fail(path: str, exc: BaseException) -> ModelFileError:
    text = " ".join(str(exc).split())[:200]
    return ModelFileError(f"{path}: not a readable torch.export archive ({type(exc).__name__}: {text})")


def _tensors(reader, config_name: str, directory: str, path: str, meta: bool) -> dict:
    """{name: torch tensor} of the weights (or constants) a payload config lists."""
    import torch
    from torch._export.serde.serialize import (deserialize_scalar_type, deserialize_size,
                                                deserialize_storage_offset, deserialize_stride)
    from torch.export.pt2_archive._package import _build_file_map, _load_payload_config

    if config_name not in reader.get_file_names():
        return {}
    config = _load_payload_config(reader, config_name)
    for name, payload in config.config.items():
        if payload.use_pickle or payload.tensor_meta is None:
            raise ModelFileError(f"{path}: {name!r} is stored as a pickle; flopcount never unpickles a file "
                                 f"(unpickling can run code). Save the model again with torch.export.save "
                                 f"from a recent torch, or as ONNX or safetensors")
    out = {}
    files = None if meta else _build_file_map(reader, config, directory)
    for name, payload in config.config.items():
        tm = payload.tensor_meta
        if meta:
            t = torch.empty(deserialize_size(tm.sizes), dtype=deserialize_scalar_type(tm.dtype), device="meta")
        else:
            # over the file's storage, as a tensor of its own (not a view: export detaches in place)
            flat = files[payload.path_name]
            t = torch.empty(0, dtype=flat.dtype).set_(flat.untyped_storage(), deserialize_storage_offset(
                tm.storage_offset), deserialize_size(tm.sizes), deserialize_stride(tm.strides))
        out[name] = torch.nn.Parameter(t, requires_grad=tm.requires_grad) if payload.is_param else t
    return out


def read_program(path: str, meta: bool = False):
    """The ``ExportedProgram`` of the archive at ``path`` (see the module docstring)."""
    require_torch()
    from torch._export.serde import schema
    from torch._export.serde.serialize import ExportedProgramDeserializer, _bytes_to_dataclass
    from torch.export.pt2_archive import constants as c
    from torch.export.pt2_archive._package import PT2ArchiveReader

    if not os.path.exists(path):
        raise ModelFileError(f"{path}: no such file")
    kind = sniff.sniff(path)
    if kind != sniff.PT2:
        raise ModelFileError(f"{path}: not a torch.export archive (the file is {kind.replace('-', ' ')})")
    try:
        with PT2ArchiveReader(path) as reader:
            names = reader.get_file_names()
            models = sorted(n[len(c.MODELS_DIR):-len(".json")] for n in names
                            if n.startswith(c.MODELS_DIR) and n.endswith(".json"))
            if not models:
                raise ModelFileError(f"{path}: the archive holds no exported program (models/*.json)")
            model = "model" if "model" in models else models[0]
            program = _bytes_to_dataclass(schema.ExportedProgram,
                                          reader.read_bytes(c.MODELS_FILENAME_FORMAT.format(model)))
            weights = _tensors(reader, c.WEIGHTS_CONFIG_FILENAME_FORMAT.format(model), c.WEIGHTS_DIR, path, meta)
            consts = _tensors(reader, c.CONSTANTS_CONFIG_FILENAME_FORMAT.format(model), c.CONSTANTS_DIR, path,
                              meta)
            # the sample inputs are a pickle: given as empty, they are never read
            return ExportedProgramDeserializer().deserialize(program, weights, consts, None)
    except FlopcountError:
        raise
    except Exception as exc:  # a truncated zip, a JSON that does not fit torch's schema...
        raise _fail(path, exc) from None


def _bound(program, input_shapes, path: str):
    """``program`` with every input dim concrete: re-exported on inputs of ``input_shapes`` when
    the archive has dynamic dims."""
    import torch
    from torch.export.graph_signature import InputKind

    from ..errors import ShapeError
    from .tensors import dtype_name

    placeholders = {n.name: n for n in program.graph.nodes if n.op == "placeholder"}
    user = [placeholders[s.arg.name].meta["val"] for s in program.graph_signature.input_specs
            if s.kind == InputKind.USER_INPUT]
    if all(isinstance(d, int) for v in user for d in v.shape) and not input_shapes:
        return program
    shapes = input_shapes
    if isinstance(shapes, int):   # a batch size: the first dim of every input
        shapes = [(shapes,) + tuple(int(d) for d in v.shape[1:]) for v in user]
    if not shapes:
        raise ShapeError(f"{os.path.basename(path)}: inputs have dynamic dims "
                         f"{[[str(d) for d in v.shape] for v in user]}; give their shapes (-i / input_shape)")
    shapes = [shapes] if shapes and isinstance(shapes[0], int) else list(shapes)
    if len(shapes) != len(user):
        raise ShapeError(f"{os.path.basename(path)} takes {len(user)} input(s), got {len(shapes)} shapes")
    device = "meta" if any(t.device.type == "meta" for t in program.state_dict.values()) else "cpu"
    examples = tuple(torch.zeros(tuple(s), dtype=getattr(torch, dtype_name(v.dtype)), device=device)
                     for s, v in zip(shapes, user))
    return torch.export.export(program.module(), examples, strict=False)


def _inputs_on_meta(program) -> None:
    """Record the inputs as meta tensors, like the weights read as meta: re-tracing the program
    (functionalization) then sees one device."""
    import torch

    for node in program.graph.nodes:
        value = node.meta.get("val")
        if node.op == "placeholder" and isinstance(value, torch.Tensor) and value.device.type != "meta":
            with value.fake_mode:
                node.meta["val"] = torch.empty_strided(value.shape, value.stride(), dtype=value.dtype,
                                                       device="meta")


def load(path, input_shapes=None, device=None):
    """The Graph of the ``.pt2`` archive at ``path``; ``device="meta"`` reads no weights.
    ``input_shapes`` (a list of shapes in input order, or a batch size) binds dynamic dims."""
    from ..device import device as parse_device
    from .importer import convert

    path = os.fspath(path)
    meta = device is not None and parse_device(device).type == "meta"
    program = read_program(path, meta)
    name = os.path.splitext(os.path.basename(path))[0]
    if meta:
        _inputs_on_meta(program)
    try:
        with quiet_export():
            program = _bound(program, input_shapes, path).run_decompositions({})
    except FlopcountError:
        raise
    except Exception as exc:
        raise _fail(path, exc) from None
    graph, notes = convert(from_program(program, name))
    graph.notes = notes
    return graph


__all__ = ["load", "read_program"]
