"""PyTorch models as runtime Graphs: ``rt.torch.to_graph(module, *example_inputs)`` and
``rt.torch.load("model.pt2")``.

    import torch, torchvision, flopcount.runtime as rt
    graph = rt.torch.to_graph(torchvision.models.resnet18(), torch.randn(1, 3, 224, 224))
    graph.cost().macs                                    # 1814073344, as the zoo's resnet18

The module is captured with ``torch.export`` (``capture.py``; an eager run recorded op by op
where export refuses) and each ATen node is converted into runtime ops (``converters/``,
``importer.py``), in the module scope torch recorded for it. ``.pt2`` archives
(``torch.export.save``) are read without unpickling anything (``archive.py``).

torch is imported only when one of these functions is called: ``import flopcount.runtime``
does not need it. Without it they raise one line saying what to install.
"""

from __future__ import annotations

import sys


def is_module(obj) -> bool:
    """Whether ``obj`` is a ``torch.nn.Module`` (without importing torch when it is not loaded)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, torch.nn.Module)


def is_tensor(obj) -> bool:
    """Whether ``obj`` is a ``torch.Tensor`` (without importing torch)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, torch.Tensor)


def to_graph(module, *example_inputs, train: bool = False, moe_routing: str | None = None, **example_kwargs):
    """The Graph of ``module(*example_inputs, **example_kwargs)``: shapes and dtypes are those of
    the example (torch tensors, or runtime tensors); ``train`` captures training mode (batch
    statistics, active dropout), else eval mode. The graph's parameters share the torch
    tensors' memory (meta when the model is on torch's meta device). Remarks on the capture
    (a fallback, ops without a mapping, how MoE layers were routed) are in ``graph.notes``.

    A transformers mixture of experts is routed by ``moe_routing`` (``routing.py``): by default
    the router's own choice when the model has weights, the balanced routing on meta."""
    from .capture import capture
    from .importer import convert
    from .moe_routing import routed_if_moe

    args, kwargs = _torch_inputs(example_inputs), {k: _torch_input(v) for k, v in example_kwargs.items()}
    with routed_if_moe(module, moe_routing) as routing:
        captured = capture(module, args, kwargs, train=train)
    graph, notes = convert(captured)
    graph.notes = notes + routing
    return graph


def _torch_inputs(values) -> tuple:
    return tuple(_torch_input(v) for v in values)


def _torch_input(value):
    from ..tensor import Tensor
    from .tensors import to_torch

    return to_torch(value) if isinstance(value, Tensor) else value


def load(path, input_shapes=None, device=None):
    """The Graph of a ``torch.export.save`` archive (see ``archive.py``)."""
    from .archive import load as load_archive

    return load_archive(path, input_shapes=input_shapes, device=device)


__all__ = ["is_module", "is_tensor", "to_graph", "load"]
