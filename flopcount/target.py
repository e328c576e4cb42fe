"""What loading a model gives: a :class:`Target` (the model and what a caller needs to know
about it), the kinds of model spec, and the inputs of a graph. ``loading.py`` and
``torch_loading.py`` both make Targets; neither imports the other's module at import time
for them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .inputs import InputSpec
from .runtime.graph import Graph

OBJECT, FACTORY, ONNX, NATIVE, ZOO = "object", "factory", "onnx", "native", "zoo"
TORCH, PT2 = "torch", "pt2"   # a torch.nn.Module (see torch_loading.py), a torch.export archive
HF = "hf"                     # a Hugging Face model folder (config.json, *.safetensors)
GGUF = "gguf"                 # a GGUF file (llama.cpp): the same decoders, weights in the file's formats
JAX = "jax"                   # a JAX function or Flax module (see jax_loading.py)
TFLITE = "tflite"             # a TensorFlow Lite / LiteRT flatbuffer (.tflite)
KERAS = "keras"               # a Keras 3 .keras file, rebuilt from its config


@dataclass
class Target:
    """A loaded model and what a caller needs to know about it.

    ``expected`` lists the inputs the model takes (``None``: unknown, so shapes must be
    given); ``fixed`` means those shapes cannot change (a graph is specialized to them);
    ``device``, when set, is where its inputs must be made whatever was asked (``"meta"`` for
    a file saved without weights); ``notes`` are remarks for the user; ``path`` is the model
    file's path (ONNX, TFLite, GGUF and native files); ``torch_call`` is the PyTorch module a Graph was
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


__all__ = ["Target", "graph_inputs", "OBJECT", "FACTORY", "ONNX", "NATIVE", "ZOO", "TORCH", "PT2", "HF", "GGUF", "JAX",
           "TFLITE", "KERAS"]
