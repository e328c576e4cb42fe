"""The op an ATen op becomes when no converter maps it: its output shapes are the ones torch
recorded, it is not priced (``Op.priced``: every report lists it under "no rule" by its ATen
name and counts it as zero, and ``strict`` refuses it), no gradient, and it runs by calling the ATen op
itself on the arrays (zero-copy where the memory allows), so latency still works.

One op class per ATen op (``aten.topk``), made on first use and not registered: the registry
holds the runtime's own ops, each with its example and tests; these exist only in graphs
imported from torch.
"""

from __future__ import annotations

import numpy as np

from ..registry import Op, no_cost

_CLASSES: dict[str, type] = {}


class TorchFallback(Op):
    """Attrs: ``target`` (the ATen OpOverload), ``args``/``kwargs`` (the call with each tensor
    input replaced by ``Slot(i)``), ``specs`` (the output Spec, or a tuple of them)."""

    def shape(*inputs, target, args, kwargs, specs):
        return specs

    def forward(xp, *arrays, target, args, kwargs, specs):
        from .tensors import array_to_torch

        in_place = target._schema.is_mutable  # an in-place op recorded as is: it writes into a copy

        def fill(a):
            if isinstance(a, Slot):
                array = arrays[a.index]
                if array is None:
                    return None
                array = xp.asnumpy(array) if xp is not np else array
                return array_to_torch(array.copy() if in_place else array)
            if isinstance(a, (list, tuple)):
                return type(a)(fill(v) for v in a)
            return a

        result = target(*fill(args), **{k: fill(v) for k, v in kwargs.items()})
        outs = result if isinstance(specs, tuple) else (result,)
        arrays_out = tuple(xp.asarray(o.detach().cpu().numpy()) for o in outs)
        return arrays_out if isinstance(specs, tuple) else arrays_out[0]

    vjp = None   # torch's autograd formula is not ours to call: no gradient flows through it
    priced = False  # its arithmetic is unknown: listed as unsupported and counted as zero
    cost = no_cost


class Slot:
    """Where a tensor input goes in the call a fallback op makes."""

    __slots__ = ("index",)

    def __init__(self, index: int):
        self.index = index

    def __repr__(self) -> str:
        return f"input{self.index}"


def fallback_op(name: str, random: bool = False) -> type:
    """The fallback op class for ATen op ``name`` (``aten.topk``)."""
    cls = _CLASSES.get(name)
    if cls is None:
        cls = type(name, (TorchFallback,), {"name": name, "random": random})
        cls._kernel_by_device = {"cpu": TorchFallback.forward, "cuda": TorchFallback.forward}
        _CLASSES[name] = cls
    return cls


__all__ = ["TorchFallback", "Slot", "fallback_op"]
