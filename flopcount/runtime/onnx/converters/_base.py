"""The converter table and what a converter gets: ``NodeContext`` (attributes, opset, node name)
and helpers to read operands that must be known at import time (shapes, axes, pads).

A converter is ``fn(ctx, *inputs) -> Tensor | tuple``: ``inputs`` are runtime tensors (None
for an omitted optional input) and the converter calls runtime ops on them. While the importer
traces, an op whose inputs are all constants runs at once, so shape arithmetic (Shape, Gather,
Concat, ...) leaves constants, which ``ctx.const`` reads.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from ...errors import ShapeError, UnsupportedOpError
from ..symbolic import InputValueError
from ...graph.folding import fold_limit
from ...tensor import Tensor
from ...registry import registrar

CONVERTERS: dict[str, Callable] = {}

# {op label: (input index, unpack)} for weights a file stores packed: the importer calls
# ``unpack(array or None on meta, dims, node attributes) -> (array or None, shape, dtype)`` on
# such an initializer and imports the tensor it stands for (a parameter, at its element size)
PACKED_WEIGHTS: dict[str, tuple] = {}


# ``@converter("TopK", ...)``: the converter of each ONNX op type named, ``"TopK"`` in the
# default domain, ``"domain.OpType"`` in another (``"ai.onnx.preview.FlexAttention"``)
converter = registrar(CONVERTERS, "ONNX op", "a converter")


class NodeContext:
    """One ONNX node as its converter sees it: op type, name, the opset of its domain,
    attributes as Python values (tensors as numpy arrays), how many outputs it declares and
    which of them the model reads."""

    __slots__ = ("op_type", "name", "opset", "attrs", "n_outputs", "used", "sources", "subgraphs")

    def __init__(self, op_type: str, name: str, opset: int, attrs: dict, n_outputs: int = 1,
                 used: tuple = (True,), sources: Callable | None = None, subgraphs=None):
        self.op_type = op_type
        self.name = name
        self.opset = opset
        self.attrs = attrs
        self.n_outputs = n_outputs
        self.used = used
        self.sources = sources  # tensor -> the graph inputs it is computed from (the importer's)
        self.subgraphs = subgraphs  # runs a subgraph attribute (If, Loop, Scan); notes for the report

    def output_used(self, i: int) -> bool:
        return i < len(self.used) and self.used[i]

    def attr(self, key: str, default=None):
        return self.attrs.get(key, default)

    @property
    def where(self) -> str:
        return f"ONNX {self.op_type} node {self.name!r}" if self.name else f"ONNX {self.op_type} node"

    def unsupported(self, detail: str) -> UnsupportedOpError:
        return UnsupportedOpError(f"{self.where}: {detail}")

    # --- operands known at import time ----------------------------------------------------
    def const(self, t, what: str):
        """The value of ``t`` as a numpy array (None for an omitted input); an error when it is
        computed from the model's input data rather than from shapes and constants."""
        if t is None:
            return None
        if not is_const(t):
            names = self.sources(t) if self.sources is not None else []
            if names:
                # a graph input carries it (a Reshape target, Slice starts): its values are
                # part of the graph's specialization, as the input shapes are
                raise InputValueError(names, f"{self.where}: {what} is computed from the values of graph "
                                             f"input(s) {', '.join(repr(n) for n in names)}; bind them: "
                                             f"input_values={{{', '.join(f'{n!r}: ...' for n in names)}}}")
            raise self.unsupported(
                f"{what} depends on the values the model computes; flopcount needs it to be a "
                f"constant or shape arithmetic that folds once the input shapes are known")
        return np.asarray(t.data) if t.device.type in ("cpu", "meta") else t.numpy()

    def ints(self, t, what: str):
        """A constant 1-d (or 0-d) integer operand as a tuple of Python ints (None if omitted)."""
        value = self.const(t, what)
        return None if value is None else tuple(int(v) for v in np.asarray(value).reshape(-1))

    def scalar(self, t, what: str):
        """A constant one-element operand as a Python number (None if omitted)."""
        value = self.const(t, what)
        if value is None:
            return None
        if value.size != 1:
            raise self.unsupported(f"{what} must hold one value, got shape {value.shape}")
        return value.reshape(()).item()

    def axis(self, axis: int, ndim: int, what: str = "axis") -> int:
        """``axis`` in [-ndim, ndim) made non-negative."""
        if not -ndim <= axis < max(ndim, 1):  # (the importer prefixes the node)
            raise ShapeError(f"{what} {axis} is out of range for a tensor with {ndim} dims")
        return axis % max(ndim, 1)

    def check_size(self, shape, dtype, what: str) -> None:
        """Refuse, before allocating, a constant made at import time above the tracer's FOLD_LIMIT_BYTES
        (a file of a few bytes can ask for a huge ConstantOfShape or Range)."""
        count = math.prod(int(d) for d in shape)
        if any(int(d) < 0 for d in shape):
            raise ShapeError(f"{what}: negative dimension in {tuple(int(d) for d in shape)}")
        size, limit = count * np.dtype(dtype).itemsize, fold_limit()
        if size > limit:
            raise ShapeError(f"{what}: a constant of {count} elements ({size / 2**30:.1f} GiB) is more than "
                             f"the {limit >> 20} MiB import computes ahead of time")

    def axes(self, axes, ndim: int, what: str = "axes") -> tuple:
        return tuple(self.axis(int(a), ndim, what) for a in axes)


def is_const(t) -> bool:
    """Whether ``t`` holds data while tracing (a constant, or an initializer's tensor)."""
    return isinstance(t, Tensor) and t.data is not None


def constant(array, dtype=None) -> Tensor:
    """A CPU tensor holding ``array`` (the tracer keeps it as a graph constant)."""
    from ...tensor import tensor

    arr = np.asarray(array)
    return tensor(arr, dtype=dtype if dtype is not None else arr.dtype, device="cpu")
