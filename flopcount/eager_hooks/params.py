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


def parameter_counts(model) -> dict:
    """Dotted path -> ParamCount for every module of ``model`` ('' is the model)."""
    out = {}
    for path, module in model.named_modules():
        own = sum(p.numel() for p in module._parameters.values() if p is not None)
        seen = {}
        for p in module.parameters():
            seen[id(p)] = p
        trainable = sum(p.numel() for p in seen.values() if p.requires_grad)
        total = sum(p.numel() for p in seen.values())
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
