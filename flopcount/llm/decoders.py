"""The decoder a phase is traced on: a natively built one, or a transformers one.

Both kinds answer the same questions, so everything after (counting a step, summing a
generation, the roofline, the report) is one code path:

* ``label``, ``dtype``, ``params`` (a tied weight once), ``weight_bytes``,
  ``attn_implementation``;
* ``layers``: a ``cache.LayerCache`` per layer, what the layer keeps between steps;
* ``moe``: the ``moe.MoESummary`` of its expert layers, or None;
* ``trace(phase, batch)``: the step's ``StepGraph``;
* ``layer_path``: the dotted path of the decoder layers (``model.layers``), to group ops.

``load(model, ...)`` makes one from what the user named: a zoo name, a ``file.py:factory``, a
Hugging Face folder (natively built when flopcount has the architecture, otherwise through
transformers on torch's meta device), a flopcount Module, or a transformers module.

    decoder = load("llama2_7b", dtype="bfloat16")
    decoder.layers[0], decoder.params
"""

from __future__ import annotations

import contextlib
import os

from .. import loading
from .. import runtime as rt
from ..runtime.errors import FlopcountError, ShapeError
from ..runtime.nn.modules.module import Module
from ..runtime import torch as rt_torch
from ..runtime.quantization import _as_linear
from .cache import from_layout
from .moe import moe_summary
from .phases import kv_cache_layout
from .layers import layer_list
from .torch_decoder import StepGraph


class NativeDecoder:
    """A decoder of flopcount's zoo (or a native Hugging Face build), traced with ``rt.trace``
    on the phase's inputs on the meta device."""

    kind = "native"

    def __init__(self, net: Module, label: str):
        self.net, self.label = net, label
        self.dtype = next((p.dtype for p in net.parameters() if p.dtype.is_floating_point), rt.float32)
        self.params = sum(p.numel() for p in net.parameters())
        self.weight_bytes = sum(p.dtype.nbytes(p.numel()) for p in net.parameters())
        self.weight_format = _weight_format(net, self.dtype)
        self.layers = from_layout(kv_cache_layout(net))
        self.moe = moe_summary(net)
        self.layer_path = layer_list(net)
        self.notes = list(getattr(net, "llm_notes", ()))

    @property
    def attn_implementation(self) -> str:
        return self.net.config.attn_implementation

    @property
    def context_limit(self) -> int | None:
        value = getattr(self.net.config, "max_position_embeddings", None)
        return value if isinstance(value, int) else None

    def weights(self) -> list:
        """(numel, bytes, (out, in) or None) per parameter: (out, in) for the weights a weight
        format quantizes (linear layers, stacked experts), a tied or other weight None."""
        owners: dict = {}
        for _, module in self.net.named_modules():
            for p in module._parameters.values():
                if p is not None:
                    owners[id(p)] = owners.get(id(p), 0) + 1
        matrices = {}
        for path, module in self.net.named_modules():
            linear = _as_linear(module)
            if linear is not None and not path.endswith("lm_head") and owners.get(id(module.weight), 0) == 1:
                matrices[id(module.weight)] = tuple(linear.weight.shape)
            if hasattr(module, "num_experts"):
                for p in module._parameters.values():
                    if p is not None and p.ndim == 3 and p.shape[0] == module.num_experts:
                        matrices[id(p)] = tuple(p.shape[1:])
        unique = {id(p): p for p in self.net.parameters()}.values()
        return [(p.numel(), p.dtype.nbytes(p.numel()), matrices.get(id(p))) for p in unique]

    @contextlib.contextmanager
    def attention(self, implementation: str | None):
        """Run the block with ``implementation`` ("eager" or "sdpa"), then as before."""
        chosen = self.net.config.attn_implementation
        if implementation is not None:
            self.net.set_attn_implementation(implementation)
        try:
            yield
        finally:
            self.net.set_attn_implementation(chosen)

    def trace(self, phase, batch: int) -> StepGraph:
        training = self.net.training
        self.net.train(False)
        try:
            return StepGraph(rt.trace(self.net, **phase.step_inputs(self.net, batch, self.dtype)))
        finally:
            self.net.train(training)


def _weight_format(net: Module, dtype) -> str:
    """The dtype the weights are stored in; a file's block formats (a GGUF's Q4_K and Q6_K) by
    the bytes they take, most first."""
    by_format: dict = {}
    for p in {id(p): p for p in net.parameters()}.values():
        by_format[p.dtype] = by_format.get(p.dtype, 0) + p.dtype.nbytes(p.numel())
    if not any(isinstance(d, rt.BlockDType) for d in by_format):
        return dtype.name
    return "+".join(d.name for d in sorted(by_format, key=by_format.get, reverse=True))


def load(model, dtype=None, routing: str = "balanced"):
    """The decoder ``model`` names (module docstring), its weights in ``dtype`` when given. The
    ``real`` MoE routing needs the router's values: the model is then loaded with its weights
    and run on data; any other policy counts on the meta device."""
    on_data = routing == "real"
    if isinstance(model, str) and on_data and _is_hf_folder(model):
        return _torch_folder(model, dtype, routing)
    target = loading.load(model, "cpu" if on_data else "meta", zoo_device="meta")
    net = target.model
    if rt_torch.is_module(net):
        return _torch(net, target, dtype, routing)
    if not isinstance(net, Module):
        raise ShapeError(f"LLM phases trace a decoder Module; {target.name} is a {type(net).__name__}")
    kv_cache_layout(net)  # refuses a model without a KV cache, naming it
    if on_data and any(p.data is None for p in net.parameters()):
        raise FlopcountError(f"{target.name}: the real MoE routing needs the model's weights (a Hugging Face "
                             f"folder with safetensors, or a model with its weights); this one has none")
    current = next((p.dtype for p in net.parameters() if p.dtype.is_floating_point), rt.float32)
    if dtype is not None and rt.get_dtype(dtype) is not current:
        if target.kind == loading.OBJECT:
            raise ShapeError(f"the model's parameters are {current.name}, not {rt.get_dtype(dtype).name}; "
                             f"convert it first (model.to(dtype)) or pass a zoo name")
        net.to(rt.get_dtype(dtype))
    return NativeDecoder(net, target.name)


def _is_hf_folder(path: str) -> bool:
    from ..models import _hf_folder

    return _hf_folder.is_folder(path)


def _torch_folder(path: str, dtype, routing: str):
    """A Hugging Face folder built by transformers with its weights (for the real routing)."""
    from ..models import _hf_folder

    folder = _hf_folder.load_with_transformers(path, weights=True)
    if not _hf_folder.weight_files(path):
        raise FlopcountError(f"{path}: the real MoE routing needs the model's weights, and the folder has no "
                             f"*.safetensors")
    target = loading.Target(folder.model, os.path.basename(os.path.normpath(path)), loading.HF,
                            notes=list(folder.notes), path=path)
    return _torch(folder.model, target, dtype, routing)


def _torch(module, target, dtype, routing: str):
    from .torch_decoder import TorchDecoder, require_transformers_cache

    require_transformers_cache()
    from transformers import GenerationMixin

    if not isinstance(module, GenerationMixin) or not hasattr(module, "config"):
        raise ShapeError(f"LLM phases need a causal language model that keeps a cache between steps (a zoo "
                         f"decoder, a Hugging Face folder of a ...ForCausalLM, or a transformers causal LM); "
                         f"got {type(module).__name__}")
    if dtype is not None:
        import torch

        wanted = rt.get_dtype(dtype)
        current = next((p.dtype for p in module.parameters() if p.is_floating_point()), None)
        if current is not None and str(current).replace("torch.", "") != wanted.name:
            if target.kind == loading.TORCH and not target.path:
                raise ShapeError(f"the model's parameters are {str(current).replace('torch.', '')}, not "
                                 f"{wanted.name}; convert it first (model.to(dtype)) or pass a folder")
            module.to(getattr(torch, wanted.name))   # a model built here from a folder: ours to convert
    notes = list(target.notes)
    if routing != "real" and next(module.parameters()).device.type != "meta":
        module = _meta_twin(module)
        notes.append(f"{type(module).__name__}: counted on a copy built on the meta device from its config (a "
                     f"phase needs shapes only, and running the model over the context would take as long as "
                     f"the model itself)")
    decoder = TorchDecoder(module, target.name, routing)
    decoder.notes = notes
    return decoder


def _meta_twin(module):
    """The same transformers architecture built from ``module``'s config on torch's meta device,
    in the dtype of its weights (``module`` itself is left as it is)."""
    import torch

    dtype = next((p.dtype for p in module.parameters() if p.is_floating_point()), torch.float32)
    with torch.device("meta"):
        return type(module)._from_config(module.config, dtype=dtype).eval()


__all__ = ["NativeDecoder", "load", "layer_list"]
