"""A linear layer whose weight is stored quantized: int8, int4, float8 with block scales, or a
block format holding its scales (GGUF's Q4_K...)."""

from __future__ import annotations

from ...ops.quantized import quantized_linear
from ..parameter import Parameter
from .module import Module

__all__ = ["QuantizedLinear"]


class QuantizedLinear(Module):
    """y = x (weight · scale)ᵀ + bias, with ``weight`` (out, in) in a narrow type and ``scale``
    (out or 1, in / group), or ``weight`` in a block format and no scale; every tensor frozen.
    Made by ``rt.quantize_weights`` from a Linear, and by a GGUF file's reader."""

    def __init__(self, weight: Parameter, scale: Parameter | None, bias: Parameter | None = None):
        super().__init__()
        self.in_features, self.out_features = weight.shape[1], weight.shape[0]
        self.weight = weight
        self.register_parameter("scale", scale)
        self.register_parameter("bias", bias)

    @property
    def group_size(self) -> int:
        if self.scale is None:
            return self.weight.dtype.block
        return self.in_features // self.scale.shape[1]

    def forward(self, x):
        return quantized_linear(x, self.weight, self.scale, self.bias)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}, "
                f"weight={self.weight.dtype.name}, group_size={self.group_size}, "
                f"scale={'in blocks' if self.scale is None else self.scale.dtype.name}")
