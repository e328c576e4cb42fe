"""Conv1d/2d/3d and ConvTranspose1d/2d/3d, with PyTorch's arguments, parameters and init."""

from __future__ import annotations

import math

from ... import dtypes as _dt
from ...factories import empty
from ...ops import conv as _conv
from ...ops.movement import pad as _pad
from .. import init
from ..parameter import Parameter
from ._classes import layer_class
from .module import Module

__all__ = ["Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d"]

_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


def _ntuple(value, n: int) -> tuple:
    if isinstance(value, (tuple, list)):
        return tuple(value)
    return (value,) * n


class _ConvNd(Module):
    """What every convolution layer shares: argument checks, parameters, init and repr."""

    _nd = 0  # spatial dims, set by each subclass

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride, padding, dilation,
                 transposed: bool, output_padding, groups: int, bias: bool, padding_mode: str,
                 device=None, dtype=None):
        super().__init__()
        n = self._nd
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups != 0:
            raise ValueError("out_channels must be divisible by groups")
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(f"Invalid padding string {padding!r}, should be one of ('same', 'valid')")
            if padding == "same" and any(s != 1 for s in _ntuple(stride, n)):
                raise ValueError("padding='same' is not supported for strided convolutions")
        if padding_mode not in _PADDING_MODES:
            raise ValueError(f"padding_mode must be one of {_PADDING_MODES}, but got padding_mode='{padding_mode}'")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = _ntuple(kernel_size, n)
        self.stride = _ntuple(stride, n)
        self.padding = padding if isinstance(padding, str) else _ntuple(padding, n)
        self.dilation = _ntuple(dilation, n)
        self.transposed = transposed
        self.output_padding = _ntuple(output_padding, n)
        self.groups = groups
        self.padding_mode = padding_mode
        self._reversed_padding_repeated_twice = self._explicit_padding()
        dtype = dtype or _dt.default_float
        shape = ((in_channels, out_channels // groups) if transposed
                 else (out_channels, in_channels // groups)) + self.kernel_size
        self.weight = Parameter(empty(*shape, dtype=dtype, device=device))
        self.register_parameter("bias", Parameter(empty(out_channels, dtype=dtype, device=device)) if bias else None)
        self.reset_parameters()

    def _explicit_padding(self) -> list:
        """The padding as F.pad wants it (last dim first), for the non-zero padding modes."""
        n = self._nd
        if self.padding == "valid":
            return [0, 0] * n
        pairs = [0, 0] * n
        for i, (d, k) in enumerate(zip(self.dilation, self.kernel_size)):
            if self.padding == "same":
                total = d * (k - 1)
                left = total // 2
                before, after = left, total - left
            else:
                before = after = self.padding[i]
            pairs[2 * (n - 1 - i)], pairs[2 * (n - 1 - i) + 1] = before, after
        return pairs

    def reset_parameters(self) -> None:
        # PyTorch's default: kaiming_uniform_(a=sqrt(5)), i.e. U(±1/sqrt(fan_in)), for both
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            if fan_in != 0:
                bound = 1 / math.sqrt(fan_in)
                init.uniform_(self.bias, -bound, bound)

    def extra_repr(self) -> str:
        n = self._nd
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0,) * n:
            s += f", padding={self.padding}"
        if self.dilation != (1,) * n:
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * n:
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class _Conv(_ConvNd):
    _functional = None

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 dilation=1, groups: int = 1, bias: bool = True, padding_mode: str = "zeros",
                 device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, False,
                         0, groups, bias, padding_mode, device=device, dtype=dtype)

    def _conv_forward(self, input, weight, bias):
        fn = type(self)._functional
        if self.padding_mode != "zeros":
            padded = _pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode)
            return fn(padded, weight, bias, self.stride, 0, self.dilation, self.groups)
        return fn(input, weight, bias, self.stride, self.padding, self.dilation, self.groups)

    def forward(self, input):
        return self._conv_forward(input, self.weight, self.bias)


Conv1d = layer_class(
    _Conv, "Conv1d", _conv.conv1d,
    """1-d convolution over (N, C_in, L).

    >>> import flopcount.runtime as rt
    >>> Conv1d(4, 8, 3, padding=1)(rt.randn(2, 4, 10)).shape
    (2, 8, 10)
    """, _nd=1)
Conv2d = layer_class(
    _Conv, "Conv2d", _conv.conv2d,
    """2-d convolution over (N, C_in, H, W); ``padding_mode`` zeros, reflect, replicate or circular.

    >>> import flopcount.runtime as rt
    >>> Conv2d(3, 16, 3, stride=2, padding=1)(rt.randn(1, 3, 32, 32)).shape
    (1, 16, 16, 16)
    """, _nd=2)
Conv3d = layer_class(_Conv, "Conv3d", _conv.conv3d, "3-d convolution over (N, C_in, D, H, W).", _nd=3)


class _ConvTransposeNd(_ConvNd):
    _functional = None

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 output_padding=0, groups: int = 1, bias: bool = True, dilation=1,
                 padding_mode: str = "zeros", device=None, dtype=None):
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {type(self).__name__}')
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, True,
                         output_padding, groups, bias, padding_mode, device=device, dtype=dtype)

    def _output_padding(self, input, output_size) -> tuple:
        """The output_padding that makes the output ``output_size`` (PyTorch's rule)."""
        if output_size is None:
            return self.output_padding
        n = self._nd
        output_size = tuple(output_size)
        non_spatial = 2 if input.ndim == n + 2 else 1
        if len(output_size) == non_spatial + n:
            output_size = output_size[non_spatial:]
        if len(output_size) != n:
            raise ValueError(f"ConvTranspose{n}D: for {input.ndim}D input, output_size must have {n} "
                             f"or {non_spatial + n} elements (got {len(output_size)})")
        result = []
        for d in range(n):
            smallest = ((input.shape[d + non_spatial] - 1) * self.stride[d] - 2 * self.padding[d]
                        + self.dilation[d] * (self.kernel_size[d] - 1) + 1)
            largest = smallest + self.stride[d] - 1
            if not smallest <= output_size[d] <= largest:
                raise ValueError(f"requested an output size of {output_size}, but valid sizes range "
                                 f"from {smallest} to {largest} (for an input of {input.shape[2:]})")
            result.append(output_size[d] - smallest)
        return tuple(result)

    def forward(self, input, output_size=None):
        output_padding = self._output_padding(input, output_size)
        return type(self)._functional(input, self.weight, self.bias, self.stride, self.padding,
                                      output_padding, self.groups, self.dilation)


ConvTranspose1d = layer_class(
    _ConvTransposeNd, "ConvTranspose1d", _conv.conv_transpose1d,
    """1-d transposed convolution; weight (in_channels, out_channels/groups, k).

    >>> import flopcount.runtime as rt
    >>> ConvTranspose1d(4, 2, 3, stride=2)(rt.randn(1, 4, 5)).shape
    (1, 2, 11)
    """, _nd=1)
ConvTranspose2d = layer_class(
    _ConvTransposeNd, "ConvTranspose2d", _conv.conv_transpose2d,
    """2-d transposed convolution; ``forward(x, output_size=...)`` picks the output_padding.

    >>> import flopcount.runtime as rt
    >>> ConvTranspose2d(8, 4, 3, stride=2, padding=1)(rt.randn(1, 8, 5, 5), output_size=(10, 10)).shape
    (1, 4, 10, 10)
    """, _nd=2)
ConvTranspose3d = layer_class(
    _ConvTransposeNd, "ConvTranspose3d", _conv.conv_transpose3d,
    "3-d transposed convolution; weight (in_channels, out_channels/groups, kD, kH, kW).", _nd=3)
