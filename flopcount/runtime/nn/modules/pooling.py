"""MaxPool/AvgPool 1d/2d/3d and the adaptive pools, with PyTorch's arguments and repr."""

from __future__ import annotations

from ...ops import pooling as _pool
from ._classes import layer_class
from .module import Module

__all__ = ["MaxPool1d", "MaxPool2d", "MaxPool3d", "AvgPool1d", "AvgPool2d", "AvgPool3d",
           "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveAvgPool3d",
           "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "AdaptiveMaxPool3d"]


def _single(value) -> tuple:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


class _MaxPoolNd(Module):
    _functional = None

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices: bool = False,
                 ceil_mode: bool = False):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.dilation = dilation
        self.return_indices = return_indices
        self.ceil_mode = ceil_mode

    def forward(self, input):
        return type(self)._functional(input, self.kernel_size, self.stride, self.padding, self.dilation,
                                      ceil_mode=self.ceil_mode, return_indices=self.return_indices)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


MaxPool1d = layer_class(
    _MaxPoolNd, "MaxPool1d", _pool.max_pool1d,
    """Max over sliding windows of (N, C, L).

    >>> import flopcount.runtime as rt
    >>> MaxPool1d(2)(rt.randn(1, 3, 8)).shape
    (1, 3, 4)
    """)
MaxPool2d = layer_class(
    _MaxPoolNd, "MaxPool2d", _pool.max_pool2d,
    """Max over sliding windows of (N, C, H, W), e.g. ResNet's ``MaxPool2d(3, 2, 1)``.

    >>> import flopcount.runtime as rt
    >>> MaxPool2d(kernel_size=3, stride=2, padding=1)(rt.randn(1, 64, 112, 112)).shape
    (1, 64, 56, 56)
    """)
MaxPool3d = layer_class(_MaxPoolNd, "MaxPool3d", _pool.max_pool3d, "Max over sliding windows of (N, C, D, H, W).")


class AvgPool1d(Module):
    """Average over sliding windows of (N, C, L).

    >>> import flopcount.runtime as rt
    >>> AvgPool1d(3, stride=2)(rt.randn(1, 2, 9)).shape
    (1, 2, 4)
    """

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
                 count_include_pad: bool = True):
        super().__init__()
        self.kernel_size = _single(kernel_size)
        self.stride = _single(stride if stride is not None else kernel_size)
        self.padding = _single(padding)
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad

    def forward(self, input):
        return _pool.avg_pool1d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                                self.count_include_pad)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class _AvgPoolNd(Module):
    _functional = None

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
                 count_include_pad: bool = True, divisor_override=None):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad
        self.divisor_override = divisor_override

    def forward(self, input):
        return type(self)._functional(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                                      self.count_include_pad, self.divisor_override)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


AvgPool2d = layer_class(
    _AvgPoolNd, "AvgPool2d", _pool.avg_pool2d,
    """Average over sliding windows of (N, C, H, W).

    >>> import flopcount.runtime as rt
    >>> AvgPool2d(2)(rt.randn(1, 8, 6, 6)).shape
    (1, 8, 3, 3)
    """)
AvgPool3d = layer_class(_AvgPoolNd, "AvgPool3d", _pool.avg_pool3d, "Average over sliding windows of (N, C, D, H, W).")


class _AdaptivePoolNd(Module):
    _functional = None

    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, input):
        return type(self)._functional(input, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


AdaptiveAvgPool1d = layer_class(_AdaptivePoolNd, "AdaptiveAvgPool1d", _pool.adaptive_avg_pool1d,
                                "Average pooling of (N, C, L) to exactly ``output_size``.")
AdaptiveAvgPool2d = layer_class(
    _AdaptivePoolNd, "AdaptiveAvgPool2d", _pool.adaptive_avg_pool2d,
    """Average pooling of (N, C, H, W) to exactly ``output_size`` (``None`` keeps a dim).

    >>> import flopcount.runtime as rt
    >>> AdaptiveAvgPool2d((1, 1))(rt.randn(2, 2048, 7, 7)).shape
    (2, 2048, 1, 1)
    """)
AdaptiveAvgPool3d = layer_class(_AdaptivePoolNd, "AdaptiveAvgPool3d", _pool.adaptive_avg_pool3d,
                                "Average pooling of (N, C, D, H, W) to exactly ``output_size``.")


class _AdaptiveMaxPoolNd(_AdaptivePoolNd):
    def __init__(self, output_size, return_indices: bool = False):
        super().__init__(output_size)
        self.return_indices = return_indices

    def forward(self, input):
        return type(self)._functional(input, self.output_size, self.return_indices)


AdaptiveMaxPool1d = layer_class(_AdaptiveMaxPoolNd, "AdaptiveMaxPool1d", _pool.adaptive_max_pool1d,
                                "Max pooling of (N, C, L) to exactly ``output_size``.")
AdaptiveMaxPool2d = layer_class(
    _AdaptiveMaxPoolNd, "AdaptiveMaxPool2d", _pool.adaptive_max_pool2d,
    """Max pooling of (N, C, H, W) to exactly ``output_size``.

    >>> import flopcount.runtime as rt
    >>> AdaptiveMaxPool2d(3)(rt.randn(1, 4, 10, 7)).shape
    (1, 4, 3, 3)
    """)
AdaptiveMaxPool3d = layer_class(_AdaptiveMaxPoolNd, "AdaptiveMaxPool3d", _pool.adaptive_max_pool3d,
                                "Max pooling of (N, C, D, H, W) to exactly ``output_size``.")
