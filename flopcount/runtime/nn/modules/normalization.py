"""Normalization layers: BatchNorm1d/2d/3d, InstanceNorm1d/2d/3d, LayerNorm, GroupNorm, RMSNorm.

Parameters and buffers have PyTorch's names, shapes and initial values (weight 1, bias 0,
running_mean 0, running_var 1, num_batches_tracked 0), so a torch state dict loads with
``strict=True``. Batch norm updates its running statistics in training as PyTorch does (the
update is a few small registered ops on the batch statistics the op returns).
"""

from __future__ import annotations

from ... import dtypes as _dt
from ...errors import ShapeError
from ...factories import empty, ones, zeros
from ...ops import norm as N
from ...ops.movement import squeeze, unsqueeze
from .. import init
from ..parameter import Parameter
from ._classes import layer_class
from .module import Module

__all__ = ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "InstanceNorm1d", "InstanceNorm2d",
           "InstanceNorm3d", "LayerNorm", "GroupNorm", "RMSNorm"]


def _shape_tuple(shape) -> tuple:
    return (int(shape),) if isinstance(shape, int) else tuple(int(s) for s in shape)


def _affine_parameters(module: Module, shape: tuple, weight: bool, bias: bool | None, device, dtype) -> None:
    """Register ``weight`` and ``bias`` of ``shape`` (filled by ``_reset_affine``), each as None
    when not wanted; ``bias=None`` registers no bias at all (RMSNorm has none)."""
    dtype = dtype or _dt.default_float
    for name, wanted in (("weight", weight), ("bias", bias)):
        if wanted:
            setattr(module, name, Parameter(empty(*shape, dtype=dtype, device=device)))
        elif wanted is not None:
            module.register_parameter(name, None)


def _reset_affine(module: Module) -> None:
    """The identity affine: weight one, bias zero (for those the module has)."""
    if module.weight is not None:
        init.ones_(module.weight)
    if getattr(module, "bias", None) is not None:
        init.zeros_(module.bias)


class _NormBase(Module):
    """Per-channel affine parameters and (optionally) running statistics."""

    _expected_dims: tuple = ()

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = True, track_running_stats: bool = True, device=None, dtype=None):
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        _affine_parameters(self, (num_features,), affine, affine, device, dtype)
        dtype = dtype or _dt.default_float
        if track_running_stats:
            self.register_buffer("running_mean", zeros(num_features, dtype=dtype, device=device))
            self.register_buffer("running_var", ones(num_features, dtype=dtype, device=device))
            self.register_buffer("num_batches_tracked", zeros((), dtype=_dt.int64, device=device))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self) -> None:
        if self.track_running_stats:
            self.running_mean.zero_()
            self.running_var.fill_(1)
            self.num_batches_tracked.zero_()

    def reset_parameters(self) -> None:
        self.reset_running_stats()
        _reset_affine(self)

    def _check_input_dim(self, input) -> None:
        if input.ndim not in self._expected_dims:
            wanted = " or ".join(f"{d}D" for d in self._expected_dims)
            raise ShapeError(f"{type(self).__name__}: expected {wanted} input (got {input.ndim}D input "
                             f"of shape {input.shape})")

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"track_running_stats={self.track_running_stats}")


class _BatchNorm(_NormBase):
    def forward(self, input):
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:  # cumulative moving average
                count = int(self.num_batches_tracked.item()) if self.num_batches_tracked.data is not None else 1
                factor = 1.0 / count
        # eval without running statistics normalizes with the batch's, as PyTorch
        use_batch_stats = self.training or (self.running_mean is None and self.running_var is None)
        track = not self.training or self.track_running_stats
        return N.batch_norm(input, self.running_mean if track else None, self.running_var if track else None,
                            self.weight, self.bias, use_batch_stats, factor, self.eps)


BatchNorm1d = layer_class(
    _BatchNorm, "BatchNorm1d", None,
    """Batch norm over (N, C) or (N, C, L) input.

    >>> bn = BatchNorm1d(3)
    >>> [name for name, _ in bn.state_dict().items()]
    ['weight', 'bias', 'running_mean', 'running_var', 'num_batches_tracked']
    """, _expected_dims=(2, 3))
BatchNorm2d = layer_class(_BatchNorm, "BatchNorm2d", None, "Batch norm over (N, C, H, W) input.", _expected_dims=(4,))
BatchNorm3d = layer_class(_BatchNorm, "BatchNorm3d", None,
                          "Batch norm over (N, C, D, H, W) input.", _expected_dims=(5,))


class _InstanceNorm(_NormBase):
    """Instance norm: no affine and no running statistics by default, as PyTorch."""

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = False, track_running_stats: bool = False, device=None, dtype=None):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype)

    def forward(self, input):
        self._check_input_dim(input)
        unbatched = input.ndim == self._expected_dims[0]
        if unbatched:
            input = unsqueeze(input, 0)
        if input.shape[1] != self.num_features and self.affine:
            raise ShapeError(f"{type(self).__name__}: expected input with {self.num_features} channels, "
                             f"got {input.shape}")
        use_input_stats = self.training or not self.track_running_stats
        out = N.instance_norm(input, self.running_mean, self.running_var, self.weight, self.bias,
                              use_input_stats, 0.0 if self.momentum is None else self.momentum, self.eps)
        return squeeze(out, 0) if unbatched else out


InstanceNorm1d = layer_class(_InstanceNorm, "InstanceNorm1d", None,
                             "Instance norm over (N, C, L) or unbatched (C, L) input.", _expected_dims=(2, 3))
InstanceNorm2d = layer_class(_InstanceNorm, "InstanceNorm2d", None,
                             "Instance norm over (N, C, H, W) or unbatched (C, H, W) input.", _expected_dims=(3, 4))
InstanceNorm3d = layer_class(
    _InstanceNorm, "InstanceNorm3d", None,
    "Instance norm over (N, C, D, H, W) or unbatched (C, D, H, W) input.", _expected_dims=(4, 5))


class LayerNorm(Module):
    """Normalization over the trailing ``normalized_shape`` dims with an elementwise affine
    (``weight`` and, unless ``bias=False``, ``bias``)."""

    def __init__(self, normalized_shape, eps: float = 1e-5, elementwise_affine: bool = True, bias: bool = True,
                 device=None, dtype=None):
        super().__init__()
        self.normalized_shape = _shape_tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        _affine_parameters(self, self.normalized_shape, elementwise_affine, elementwise_affine and bias,
                           device, dtype)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        _reset_affine(self)

    def forward(self, input):
        return N.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class GroupNorm(Module):
    """Normalization over groups of channels with a per-channel affine."""

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True,
                 device=None, dtype=None):
        super().__init__()
        if num_channels % num_groups:
            raise ValueError(f"GroupNorm: num_channels ({num_channels}) must be divisible by "
                             f"num_groups ({num_groups})")
        self.num_groups, self.num_channels, self.eps, self.affine = num_groups, num_channels, eps, affine
        _affine_parameters(self, (num_channels,), affine, affine, device, dtype)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        _reset_affine(self)

    def forward(self, input):
        return N.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}"


class RMSNorm(Module):
    """x / sqrt(mean(x²) + eps) over the trailing ``normalized_shape`` dims, times ``weight``;
    ``eps=None`` uses the machine epsilon of the input's dtype (torch.nn.RMSNorm)."""

    def __init__(self, normalized_shape, eps: float | None = None, elementwise_affine: bool = True,
                 device=None, dtype=None):
        super().__init__()
        self.normalized_shape = _shape_tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        _affine_parameters(self, self.normalized_shape, elementwise_affine, None, device, dtype)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        _reset_affine(self)

    def forward(self, input):
        return N.rms_norm(input, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"
