"""Building blocks shared by several zoo models, as torchvision's ``ops/misc.py`` defines them.

Module paths and parameter names match torchvision's, so a torchvision state dict loads into a
model built from these blocks unchanged:

    block = Conv2dNormActivation(3, 32, kernel_size=3, stride=2)   # 0: Conv2d, 1: BatchNorm2d, 2: ReLU
    [name for name, _ in block.named_parameters()]                  # ['0.weight', '1.weight', '1.bias']
"""

from __future__ import annotations

from typing import Callable, Sequence

import flopcount.runtime as rt
from flopcount.runtime import nn

F = nn.functional

__all__ = ["make_divisible", "Conv2dNormActivation", "SqueezeExcitation", "StochasticDepth",
           "stochastic_depth", "MLP", "Permute"]


def make_divisible(v: float, divisor: int, min_value: int | None = None) -> int:
    """``v`` rounded to the nearest multiple of ``divisor``, never more than 10% below ``v``.

    The channel rounding of the MobileNet/EfficientNet/RegNet papers (torchvision's
    ``_make_divisible``).

    >>> make_divisible(32 * 0.75, 8), make_divisible(10, 8)
    (24, 16)
    """
    if min_value is None:
        min_value = divisor
    new_v = max(min_value, int(v + divisor / 2) // divisor * divisor)
    if new_v < 0.9 * v:
        new_v += divisor
    return new_v


class Conv2dNormActivation(nn.Sequential):
    """Conv2d, then a norm layer, then an activation: children ``0``, ``1``, ``2``.

    ``padding=None`` keeps the spatial size at stride 1 (``(k - 1) // 2 * dilation``); the conv
    has a bias only when there is no norm layer (unless ``bias`` says otherwise).

    >>> block = Conv2dNormActivation(16, 32, kernel_size=1, activation_layer=None)
    >>> [type(m).__name__ for m in block]
    ['Conv2d', 'BatchNorm2d']
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int | tuple = 3,
                 stride: int | tuple = 1, padding: int | tuple | str | None = None, groups: int = 1,
                 norm_layer: Callable[..., nn.Module] | None = nn.BatchNorm2d,
                 activation_layer: Callable[..., nn.Module] | None = nn.ReLU,
                 dilation: int | tuple = 1, inplace: bool | None = True, bias: bool | None = None):
        if padding is None:
            if isinstance(kernel_size, int) and isinstance(dilation, int):
                padding = (kernel_size - 1) // 2 * dilation
            else:
                ks = (kernel_size,) * 2 if isinstance(kernel_size, int) else tuple(kernel_size)
                dil = (dilation,) * 2 if isinstance(dilation, int) else tuple(dilation)
                padding = tuple((k - 1) // 2 * d for k, d in zip(ks, dil))
        if bias is None:
            bias = norm_layer is None
        layers = [nn.Conv2d(in_channels, out_channels, kernel_size, stride, padding,
                            dilation=dilation, groups=groups, bias=bias)]
        if norm_layer is not None:
            layers.append(norm_layer(out_channels))
        if activation_layer is not None:
            params = {} if inplace is None else {"inplace": inplace}
            layers.append(activation_layer(**params))
        super().__init__(*layers)
        self.out_channels = out_channels


class SqueezeExcitation(nn.Module):
    """Squeeze-and-Excitation: ``x * scale_activation(fc2(activation(fc1(avgpool(x)))))``.

    ``fc1`` and ``fc2`` are 1x1 convolutions with bias, as in torchvision.

    >>> se = SqueezeExcitation(64, 16)
    >>> se.fc1.weight.shape, se.fc2.weight.shape
    ((16, 64, 1, 1), (64, 16, 1, 1))
    """

    def __init__(self, input_channels: int, squeeze_channels: int,
                 activation: Callable[..., nn.Module] = nn.ReLU,
                 scale_activation: Callable[..., nn.Module] = nn.Sigmoid):
        super().__init__()
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Conv2d(input_channels, squeeze_channels, 1)
        self.fc2 = nn.Conv2d(squeeze_channels, input_channels, 1)
        self.activation = activation()
        self.scale_activation = scale_activation()

    def _scale(self, x):
        scale = self.avgpool(x)
        scale = self.activation(self.fc1(scale))
        return self.scale_activation(self.fc2(scale))

    def forward(self, x):
        return self._scale(x) * x


def stochastic_depth(x, p: float, mode: str, training: bool = True):
    """Zero whole residual branches with probability ``p`` and rescale the survivors.

    ``mode="row"`` draws one keep/drop per sample, ``"batch"`` one for the whole batch. Outside
    training (or with ``p == 0``) the input comes back unchanged and no op runs.

    >>> x = rt.ones(4, 3)
    >>> stochastic_depth(x, 0.5, "row", training=False) is x
    True
    """
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"stochastic_depth: drop probability must be in [0, 1], got {p}")
    if mode not in ("batch", "row"):
        raise ValueError(f"stochastic_depth: mode must be 'batch' or 'row', got {mode!r}")
    if not training or p == 0.0:
        return x
    size = (x.shape[0],) + (1,) * (x.ndim - 1) if mode == "row" else (1,) * x.ndim
    # Dropout of a ones tensor is exactly the rescaled Bernoulli keep mask, drawn by the
    # registered random op (so graphs keep it random and it is counted like any dropout).
    noise = F.dropout(rt.ones(*size, dtype=x.dtype, device=x.device), p=p, training=True)
    return x * noise


class StochasticDepth(nn.Module):
    """Module form of :func:`stochastic_depth` (no parameters).

    >>> StochasticDepth(0.1, "row")
    StochasticDepth(p=0.1, mode=row)
    """

    def __init__(self, p: float, mode: str):
        super().__init__()
        self.p = p
        self.mode = mode

    def forward(self, x):
        return stochastic_depth(x, self.p, self.mode, self.training)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(p={self.p}, mode={self.mode})"


class MLP(nn.Sequential):
    """Linear layers with (norm,) activation and dropout between them, dropout at the end.

    Children are numbered as torchvision numbers them: for ``hidden_channels=[h, out]`` without
    norm, ``0`` Linear, ``1`` activation, ``2`` Dropout, ``3`` Linear, ``4`` Dropout.

    >>> mlp = MLP(8, [32, 8], activation_layer=nn.GELU)
    >>> [type(m).__name__ for m in mlp]
    ['Linear', 'GELU', 'Dropout', 'Linear', 'Dropout']
    """

    def __init__(self, in_channels: int, hidden_channels: Sequence[int],
                 norm_layer: Callable[..., nn.Module] | None = None,
                 activation_layer: Callable[..., nn.Module] | None = nn.ReLU,
                 inplace: bool | None = None, bias: bool = True, dropout: float = 0.0):
        params = {} if inplace is None else {"inplace": inplace}
        layers = []
        in_dim = in_channels
        for hidden_dim in hidden_channels[:-1]:
            layers.append(nn.Linear(in_dim, hidden_dim, bias=bias))
            if norm_layer is not None:
                layers.append(norm_layer(hidden_dim))
            layers.append(activation_layer(**params))
            layers.append(nn.Dropout(dropout, **params))
            in_dim = hidden_dim
        layers.append(nn.Linear(in_dim, hidden_channels[-1], bias=bias))
        layers.append(nn.Dropout(dropout, **params))
        super().__init__(*layers)


class Permute(nn.Module):
    """Permute the dimensions of the input (a view: no arithmetic, no bytes).

    >>> Permute([0, 2, 3, 1])(rt.zeros(1, 3, 4, 5)).shape
    (1, 4, 5, 3)
    """

    def __init__(self, dims: Sequence[int]):
        super().__init__()
        self.dims = list(dims)

    def forward(self, x):
        return rt.permute(x, self.dims)

    def extra_repr(self) -> str:
        return f"dims={self.dims}"


# --- GoogLeNet / Inception v3 ----------------------------------------------------------------

__all__ += ["BasicConv2d", "imagenet_to_unit_range", "trunc_normal_init_"]


class BasicConv2d(nn.Module):
    """Conv2d without bias -> BatchNorm2d(eps=0.001) -> ReLU: the unit of GoogLeNet and Inception v3.

    >>> block = BasicConv2d(3, 8, kernel_size=3, padding=1)
    >>> [name for name, _ in block.named_parameters()]
    ['conv.weight', 'bn.weight', 'bn.bias']
    """

    def __init__(self, in_channels: int, out_channels: int, **kwargs) -> None:
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, bias=False, **kwargs)
        self.bn = nn.BatchNorm2d(out_channels, eps=0.001)

    def forward(self, x):
        return F.relu(self.bn(self.conv(x)), inplace=True)


_IMAGENET_MEAN = (0.485, 0.456, 0.406)
_IMAGENET_STD = (0.229, 0.224, 0.225)


def imagenet_to_unit_range(x):
    """Turn an ImageNet-normalized batch (N, 3, H, W) into the ``(pixel - 0.5) / 0.5`` scaling.

    torchvision's ``transform_input`` of GoogLeNet and Inception v3: their ported weights expect
    inputs in [-1, 1], while the usual preprocessing gives mean/std-normalized ones.

    >>> [round(v, 3) for v in imagenet_to_unit_range(rt.zeros(1, 3, 2, 2))[0, :, 0, 0].tolist()]
    [-0.03, -0.088, -0.188]
    """
    channels = [rt.unsqueeze(x[:, c], 1) * (std / 0.5) + (mean - 0.5) / 0.5
                for c, (mean, std) in enumerate(zip(_IMAGENET_MEAN, _IMAGENET_STD))]
    return rt.cat(channels, 1)


def trunc_normal_init_(model: nn.Module, std: float) -> None:
    """torchvision's initialization of GoogLeNet and Inception v3, in place.

    Conv2d and Linear weights: normal(0, std) truncated to [-2, 2] (absolute bounds, as
    torchvision passes them), where a module's own ``stddev`` attribute overrides ``std``; their
    biases keep the layer default. BatchNorm2d: weight 1, bias 0.
    """
    for m in model.modules():
        if isinstance(m, (nn.Conv2d, nn.Linear)):
            nn.init.trunc_normal_(m.weight, mean=0.0, std=float(getattr(m, "stddev", std)), a=-2, b=2)
        elif isinstance(m, nn.BatchNorm2d):
            nn.init.constant_(m.weight, 1)
            nn.init.constant_(m.bias, 0)


def he_fan_out_init_(model: nn.Module, linear: Callable[[nn.Module], None] | None = None) -> None:
    """torchvision's initialization of ResNet, VGG, MobileNet and EfficientNet, in place.

    Conv2d weights: He normal over fan_out (ReLU gain), biases zero. BatchNorm2d and GroupNorm:
    weight 1, bias 0. Each Linear goes to ``linear`` (each model has its own rule); with None
    they keep the layer default.
    """
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, (nn.BatchNorm2d, nn.GroupNorm)):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
        elif linear is not None and isinstance(m, nn.Linear):
            linear(m)


def normal_linear_init_(m: nn.Module, std: float = 0.01) -> None:
    """A Linear's weight N(0, std) and bias zero (torchvision's classifier heads)."""
    nn.init.normal_(m.weight, 0.0, std)
    nn.init.zeros_(m.bias)
