"""Parameter counts per module: own and subtree totals, trainable and frozen apart, each
parameter once however many modules share it; and parameter/buffer bytes by dtype."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class ParamCount:
    own: int = 0
    total: int = 0
    trainable: int = 0
    frozen: int = 0


class ModelIndex:
    """A model's modules (with dotted paths), parameters and buffers, walked once.
    ``ModelIndex.of_tensors(params, buffers)`` indexes a Graph's tensors (no modules)."""

    def __init__(self, model):
        self.modules = list(model.named_modules())
        self.params = list(model.parameters())
        self.buffers = list(model.buffers())
        self.paths = {id(m): path for path, m in self.modules}

    @classmethod
    def of_tensors(cls, params: list, buffers: list) -> "ModelIndex":
        index = cls.__new__(cls)
        index.modules, index.params, index.buffers, index.paths = [], list(params), list(buffers), {}
        return index


def parameter_counts(model, modules: list | None = None) -> dict:
    """Dotted path -> ParamCount for every module of ``model`` ('' is the model); one pass
    over the tree, each subtree's parameters gathered once (shared modules included)."""
    subtree: dict = {}

    def gather(module) -> dict:
        key = id(module)
        if key not in subtree:
            params = {id(p): p for p in module._parameters.values() if p is not None}
            for child in module._modules.values():
                if child is not None:
                    params.update(gather(child))
            subtree[key] = params
        return subtree[key]

    out = {}
    for path, module in modules if modules is not None else model.named_modules():
        params = gather(module)
        own = sum(p.numel() for p in module._parameters.values() if p is not None)
        total = sum(p.numel() for p in params.values())
        trainable = sum(p.numel() for p in params.values() if p.requires_grad)
        out[path] = ParamCount(own, total, trainable, total - trainable)
    return out


def bytes_by_dtype(tensors) -> dict:
    """dtype name -> bytes of the given tensors (each object once)."""
    out: dict = {}
    seen = set()
    for t in tensors:
        if t is None or id(t) in seen:
            continue
        seen.add(id(t))
        out[t.dtype.name] = out.get(t.dtype.name, 0) + t.numel() * t.dtype.itemsize
    return out
