"""Parameter counts per module: own and subtree totals, trainable and frozen apart, each
parameter once however many modules share it; and parameter/buffer bytes by dtype."""

from __future__ import annotations

from dataclasses import dataclass
from math import prod


@dataclass
class ParamCount:
    own: int = 0
    total: int = 0
    trainable: int = 0
    frozen: int = 0


def _default_walks(model) -> bool:
    """Does ``model`` walk its tree as Module does (no overridden traversal)?"""
    from ..runtime.nn.modules.module import Module

    cls = type(model)
    return all(getattr(cls, name) is getattr(Module, name)
               for name in ("named_modules", "parameters", "named_parameters", "buffers", "named_buffers"))


class ModelIndex:
    """A model's modules (with dotted paths), parameters and buffers, walked once.
    ``ModelIndex.of_tensors(params, buffers)`` indexes a Graph's tensors (no modules)."""

    def __init__(self, model):
        self.modules = list(model.named_modules())
        if _default_walks(model):
            # what parameters() and buffers() give (tree order, each object once), from the
            # one walk instead of two more
            self.params = _members(self.modules, "_parameters")
            self.buffers = _members(self.modules, "_buffers")
        else:
            self.params = list(model.parameters())
            self.buffers = list(model.buffers())
        self.paths = {id(m): path for path, m in self.modules}

    @classmethod
    def of_tensors(cls, params: list, buffers: list) -> "ModelIndex":
        index = cls.__new__(cls)
        index.modules, index.params, index.buffers, index.paths = [], list(params), list(buffers), {}
        return index


def _members(modules: list, store: str) -> list:
    seen: set = set()
    out = []
    for _, module in modules:
        for value in getattr(module, store).values():
            if value is not None and id(value) not in seen:
                seen.add(id(value))
                out.append(value)
    return out


def parameter_counts(model, modules: list | None = None) -> dict:
    """Dotted path -> ParamCount for every module of ``model`` ('' is the model); one pass
    over the tree, each subtree's parameters gathered once (shared modules included)."""
    modules = modules if modules is not None else list(model.named_modules())
    counts = _tree_counts(modules)
    return counts if counts is not None else _shared_counts(modules)


def _tree_counts(modules: list) -> dict | None:
    """The counts of a tree in which no module and no parameter is reached twice: every
    subtree's totals are its own plus its children's, summed bottom-up. ``None`` when
    something is shared (then each subtree's parameters must be gathered and deduplicated)."""
    position = {id(m): i for i, (_, m) in enumerate(modules)}
    parent = [-1] * len(modules)
    own, trainable = [0] * len(modules), [0] * len(modules)
    slots, seen = 0, set()
    for i, (_, module) in enumerate(modules):
        for p in module._parameters.values():
            if p is not None:
                n = prod(p.shape)
                own[i] += n
                if p.requires_grad:
                    trainable[i] += n
                slots += 1
                seen.add(id(p))
        for child in module._modules.values():
            if child is not None:
                j = position.get(id(child), -1)
                if j <= i or parent[j] != -1:  # reached twice (or from below): shared
                    return None
                parent[j] = i
    if slots != len(seen):  # a parameter in two places
        return None
    total, train = list(own), list(trainable)
    for i in range(len(modules) - 1, 0, -1):  # children come after their parent
        p = parent[i]
        if p >= 0:
            total[p] += total[i]
            train[p] += train[i]
    return {path: ParamCount(own[i], total[i], train[i], total[i] - train[i])
            for i, (path, _) in enumerate(modules)}


def _shared_counts(modules: list) -> dict:
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
    for path, module in modules:
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
        name = t.dtype.name
        out[name] = out.get(name, 0) + prod(t.shape) * t.dtype.itemsize
    return out
