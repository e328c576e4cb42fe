"""The converter table and what a converter gets.

A converter is ``fn(ctx, *args, **kwargs) -> Tensor | tuple | list | None``, called with the ATen
op's own arguments (its schema's names, so a converter reads like the op's documentation):
graph values as runtime tensors, ``torch.dtype`` as the runtime's dtype, everything else (ints,
floats, lists, devices, memory formats) as exported. It calls the runtime's ops and functional
API, which the importer's tracer records. Ops whose inputs are all constants run at once, so
masks and position ids built inside ``forward`` fold away as they do in the runtime's own trace.

    @converter("conv2d", "conv1d", "conv3d")
    def conv(ctx, input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1): ...

Names are ATen overload packets (``conv2d`` for ``aten.conv2d.default``); a packet outside the
``aten`` namespace is written with it (``prims.convert_element_type``).
"""

from __future__ import annotations

from typing import Callable

from ...errors import UnsupportedOpError
from ...registry import Spec, registrar

CONVERTERS: dict[str, Callable] = {}


# ``@converter("conv2d", ...)``: the converter of each ATen op packet named (``aten.`` implied)
converter = registrar(CONVERTERS, "ATen op", "a converter", key=lambda name: name if "." in name else f"aten.{name}")


def same_arguments(table: dict) -> None:
    """Register each runtime function of ``table`` (ATen op -> function) as its op's converter:
    the op's arguments are the function's own, in the same order (keyword-only ones by the same
    name), so ``aten.tril(x, 1)`` is ``indexing.tril(x, 1)``."""
    for name, fn in table.items():
        converter(name)(lambda ctx, *args, _fn=fn, **kwargs: _fn(*args, **kwargs))


def packet_name(target) -> str:
    """``aten.conv2d.default`` -> ``'aten.conv2d'`` (the table's key)."""
    packet = getattr(target, "overloadpacket", None)
    if packet is None:
        return getattr(target, "__name__", str(target))
    return f"{packet._qualified_op_name.split('::')[0]}.{packet.__name__}"


class NodeContext:
    """One ATen node as its converter sees it: the op (``aten.conv2d.default``), its overload
    (``default``, ``Tensor``, ``Scalar``...), the node's name and the output specs the export
    recorded (``out``: a Spec, a tuple of them, or None where the export kept none)."""

    __slots__ = ("op", "overload", "name", "out")

    def __init__(self, op: str, overload: str, name: str, out=None):
        self.op = op
        self.overload = overload
        self.name = name
        self.out = out

    @property
    def where(self) -> str:
        return f"{self.op} (node {self.name!r})"

    def unsupported(self, detail: str) -> UnsupportedOpError:
        return UnsupportedOpError(f"{self.where}: {detail}")

    @property
    def out_spec(self) -> Spec:
        """The first output's spec."""
        out = self.out
        return out[0] if isinstance(out, tuple) else out


def int_tuple(value, n: int) -> tuple:
    """An ATen int[] argument (a list, or one int meaning every dim) as a tuple of ``n`` ints."""
    if isinstance(value, (list, tuple)):
        values = tuple(int(v) for v in value)
        return values * n if len(values) == 1 and n > 1 else values
    return (int(value),) * n


__all__ = ["CONVERTERS", "converter", "same_arguments", "packet_name", "NodeContext", "int_tuple"]
