"""What loading a model gives: a :class:`Target` (the model and what a caller needs to know
about it), the kinds of model spec, the inputs of a graph and the Target of a graph read from
a file. ``loading.py``, ``file_formats.py`` and ``torch_loading.py`` all make Targets; none
imports another's module at import time for them.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field

from .inputs import InputSpec
from .runtime import errors
from .runtime.graph import Graph

OBJECT, FACTORY, ONNX, NATIVE, ZOO = "object", "factory", "onnx", "native", "zoo"
TORCH, PT2 = "torch", "pt2"   # a torch.nn.Module (see torch_loading.py), a torch.export archive
HF = "hf"                     # a Hugging Face model folder (config.json, *.safetensors)
JAX = "jax"                   # a JAX function or Flax module (see jax_loading.py)
# the file formats a frontend knows by content have the kinds file_formats.FORMATS gives them


@dataclass
class Target:
    """A loaded model and what a caller needs to know about it.

    ``expected`` lists the inputs the model takes (``None``: unknown, so shapes must be
    given); ``fixed`` means those shapes cannot change (a graph is specialized to them);
    ``device``, when set, is where its inputs must be made whatever was asked (``"meta"`` for
    a file saved without weights); ``notes`` are remarks for the user; ``path`` is the model
    file's path (ONNX, native files and file_formats' formats); ``torch_call`` is the PyTorch module a Graph was
    captured from and the inputs it was captured on (``engine="torch"`` times that call);
    ``jax_call`` likewise for a JAX model (``engine="jax"``).
    """

    model: object
    label: str
    kind: str
    expected: list | None = None
    fixed: bool = False
    notes: list = field(default_factory=list)
    device: str | None = None
    path: str = ""
    torch_call: tuple | None = None   # a captured PyTorch model: (module, args, kwargs) it was captured on
    jax_call: tuple | None = None     # a traced JAX model: (model, args) it was traced on

    @property
    def name(self) -> str:
        """The label, or for a model given as an object its graph name or class name."""
        if self.label:
            return self.label
        return self.model.name if isinstance(self.model, Graph) else type(self.model).__name__


def graph_inputs(graph) -> list:
    """The inputs of a Graph as InputSpecs (its shapes are fixed)."""
    return [InputSpec(v.name, tuple(v.shape), v.dtype.name) for v in graph.inputs]


def built_inputs(built) -> list:
    """The inputs of a zoo model or of one a reader built natively, as InputSpecs with batch 1
    (``built.inputs`` holds (name, shape without batch, dtype, high))."""
    return [InputSpec(n, (1,) + tuple(shape), dtype, high) for n, shape, dtype, high in built.inputs]


def built_target(built, label: str, kind: str, path: str) -> Target:
    """The Target of a model a reader built natively from a file or folder (``built.model``,
    ``.inputs``, ``.notes``): counted on meta when its weights were not read."""
    target = Target(built.model, label, kind, built_inputs(built), notes=list(built.notes), path=path)
    if any(p.data is None for p in built.model.parameters()):
        target.device = "meta"
    return target


def placed(graph: Graph, device) -> Graph:
    """``graph`` on ``device`` (itself when it is there already)."""
    return graph.to(device) if str(device) != str(graph.device) else graph


def graph_file_target(graph: Graph, path: str, kind: str, device) -> Target:
    """The Target of a graph imported from a file: fixed to its shapes, placed on ``device``."""
    graph = placed(graph, device)
    return Target(graph, os.path.basename(path), kind, graph_inputs(graph), fixed=True, notes=list(graph.notes),
                  path=path)


@contextlib.contextmanager
def naming_errors(path: str, keep: tuple = ()):
    """An error of a node or operator of the file at ``path`` names the file too (but those of
    the types in ``keep``, which the caller words itself)."""
    try:
        yield
    except errors.FlopcountError as exc:
        if str(exc).startswith(path) or isinstance(exc, keep):
            raise
        raise type(exc)(f"{path}: {exc}") from exc


__all__ = ["Target", "graph_inputs", "built_inputs", "built_target", "placed", "graph_file_target", "naming_errors", "OBJECT", "FACTORY", "ONNX",
           "NATIVE", "ZOO", "TORCH", "PT2", "HF", "JAX"]
