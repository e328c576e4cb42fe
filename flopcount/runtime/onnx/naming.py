"""Module scopes (``layer1.0.conv1``) and module types recovered from ONNX node names and metadata.

* PyTorch's dynamo exporter writes ``pkg.torch.onnx.name_scopes`` (the module paths from the
  root down, then the node's own name) and ``pkg.torch.onnx.class_hierarchy`` (the classes of
  those modules) into each node's metadata: the scope is the innermost module path.
* The TorchScript exporter names nodes ``/layer1/layer1.0/conv1/Conv``: one component per
  module, where a container's child is written ``layer1.0`` (its parent's name, a dot, its own).
* Any other node name without ``/`` is used as the scope itself.
"""

from __future__ import annotations

import ast

from ..errors import ModelFileError

_SCOPES_KEY = "pkg.torch.onnx.name_scopes"
_CLASSES_KEY = "pkg.torch.onnx.class_hierarchy"


def _literal_list(text: str, key: str) -> list:
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return []
    except (RecursionError, MemoryError):
        # Python's parser gives up on deep nesting (30,000 '+' terms, 100,000 '-' signs) with
        # these, before allocating anything large: a crafted file, refused like other bad ones
        raise ModelFileError(f"metadata {key} ({len(text)} characters) is nested too deeply to read") from None
    return [str(v) for v in value] if isinstance(value, (list, tuple)) else []


def torchscript_scope(name: str) -> str:
    """``/layer1/layer1.0/downsample/downsample.0/Conv`` -> ``layer1.0.downsample.0``.

    >>> torchscript_scope("/encoder/layer.0/attention/self/query/MatMul")
    'encoder.layer.0.attention.self.query'
    """
    parts: list = []
    previous = None
    for component in name.split("/")[:-1]:
        if not component:
            continue
        if previous is not None and component.startswith(previous + "."):
            parts[-1] += component[len(previous):]  # a container's child extends its parent's name
        else:
            parts.append(component)
        previous = component
    return ".".join(parts)


def node_scope(name: str, metadata: dict) -> tuple[str, str]:
    """(dotted module scope, module type name) of an ONNX node."""
    scopes = _literal_list(metadata.get(_SCOPES_KEY, ""), _SCOPES_KEY)
    if scopes:
        modules = [s for s in scopes[:-1] if s]  # the last entry is the node itself
        classes = _literal_list(metadata.get(_CLASSES_KEY, ""), _CLASSES_KEY)
        module_type = classes[-2].rsplit(".", 1)[-1] if len(classes) >= 2 and modules else ""
        return (modules[-1] if modules else ""), module_type
    if "/" in name:
        return torchscript_scope(name), ""
    return name, ""
