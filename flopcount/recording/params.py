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
    ``ModelIndex.of_tensors(params, buffers)`` indexes a Graph's tensors (no modules).

    ``counts`` is ``(own, total, trainable)``, one list each in the order of ``modules``, when
    the model is a tree (no module or parameter reached twice); otherwise None and
    :func:`parameter_counts` gathers each subtree's parameters."""

    def __init__(self, model):
        self.counts = None
        if _default_walks(model):
            self._walk(model)
        else:
            self.modules = list(model.named_modules())
            self.params = list(model.parameters())
            self.buffers = list(model.buffers())
        self.paths = {id(m): path for path, m in self.modules}

    def _walk(self, model) -> None:
        """What named_modules(), parameters() and buffers() give (tree order, each object
        once), and the parameter counts of a tree, from one walk instead of four."""
        modules, params, buffers = [], [], []
        parent, own, trainable = [], [], []
        seen_modules, seen_params, seen_buffers = set(), set(), set()
        tree = True
        stack = [("", model, -1)]  # depth first, children in order: as Module.named_modules
        while stack:
            path, module, up = stack.pop()
            key = id(module)
            if key in seen_modules:
                tree = False  # a module reached twice
                continue
            seen_modules.add(key)
            i = len(modules)
            modules.append((path, module))
            parent.append(up)
            n_own = n_trainable = 0
            d = module.__dict__
            for p in d["_parameters"].values():
                if p is None:
                    continue
                n = prod(p.shape)
                n_own += n
                if p.requires_grad:
                    n_trainable += n
                key = id(p)
                if key in seen_params:
                    tree = False  # a parameter in two places
                else:
                    seen_params.add(key)
                    params.append(p)
            own.append(n_own)
            trainable.append(n_trainable)
            for b in d["_buffers"].values():
                if b is not None:
                    key = id(b)
                    if key not in seen_buffers:
                        seen_buffers.add(key)
                        buffers.append(b)
            children = d["_modules"]
            if children:
                prefix = path + "." if path else ""
                for name in reversed(children):
                    child = children[name]
                    if child is not None:
                        stack.append((prefix + name, child, i))
        self.modules, self.params, self.buffers = modules, params, buffers
        if tree:
            total, total_trainable = list(own), list(trainable)
            for i in range(len(modules) - 1, 0, -1):  # children come after their parent
                total[parent[i]] += total[i]
                total_trainable[parent[i]] += total_trainable[i]
            self.counts = (own, total, total_trainable)

    @classmethod
    def of_tensors(cls, params: list, buffers: list) -> "ModelIndex":
        index = cls.__new__(cls)
        index.modules, index.params, index.buffers, index.paths = [], list(params), list(buffers), {}
        index.counts = None
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
        name = t.dtype.name
        out[name] = out.get(name, 0) + t.dtype.nbytes(prod(t.shape))
    return out
