"""MobileNet V2 (Sandler et al., 2018) and V3 (Howard et al., 2019), as torchvision builds them.

    net = flopcount.models.get("mobilenet_v3_small")
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import flopcount.runtime as rt
from flopcount.runtime import nn

from ._blocks import Conv2dNormActivation, SqueezeExcitation, he_fan_out_init_, make_divisible, normal_linear_init_
from ._registry import image_input, register_model

__all__ = ["MobileNetV2", "MobileNetV3", "InvertedResidual", "InvertedResidualV3", "mobilenet_v3"]


def _init_weights(model: nn.Module) -> None:
    """torchvision's MobileNet initialization: He (fan_out) convs, unit norms, small linears."""
    he_fan_out_init_(model, linear=normal_linear_init_)


# --- MobileNet V2 ------------------------------------------------------------------------------

class InvertedResidual(nn.Module):
    """V2 block: 1x1 expand (ReLU6), depthwise 3x3 (ReLU6), linear 1x1 project, residual if it fits."""

    def __init__(self, inp: int, oup: int, stride: int, expand_ratio: float, norm_layer=None):
        super().__init__()
        if stride not in (1, 2):
            raise ValueError(f"InvertedResidual: stride must be 1 or 2, got {stride}")
        norm_layer = norm_layer or nn.BatchNorm2d
        self.stride = stride
        hidden = int(round(inp * expand_ratio))
        self.use_res_connect = stride == 1 and inp == oup
        layers = []
        if expand_ratio != 1:
            layers.append(Conv2dNormActivation(inp, hidden, kernel_size=1, norm_layer=norm_layer,
                                               activation_layer=nn.ReLU6))
        layers += [
            Conv2dNormActivation(hidden, hidden, stride=stride, groups=hidden, norm_layer=norm_layer,
                                 activation_layer=nn.ReLU6),
            nn.Conv2d(hidden, oup, 1, 1, 0, bias=False),
            norm_layer(oup),
        ]
        self.conv = nn.Sequential(*layers)
        self.out_channels = oup

    def forward(self, x):
        return x + self.conv(x) if self.use_res_connect else self.conv(x)


# expand ratio t, output channels c, blocks n, stride of the first block s
_V2_SETTING = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
               (6, 160, 3, 2), (6, 320, 1, 1))


class MobileNetV2(nn.Module):
    """MobileNet V2 with torchvision's module names (features.0..18, classifier)."""

    def __init__(self, num_classes: int = 1000, width_mult: float = 1.0, inverted_residual_setting=None,
                 round_nearest: int = 8, norm_layer=None, dropout: float = 0.2):
        super().__init__()
        norm_layer = norm_layer or nn.BatchNorm2d
        setting = inverted_residual_setting or _V2_SETTING
        if any(len(row) != 4 for row in setting):
            raise ValueError(f"MobileNetV2: each setting row must be (t, c, n, s), got {setting}")
        input_channel = make_divisible(32 * width_mult, round_nearest)
        self.last_channel = make_divisible(1280 * max(1.0, width_mult), round_nearest)
        features = [Conv2dNormActivation(3, input_channel, stride=2, norm_layer=norm_layer,
                                         activation_layer=nn.ReLU6)]
        for t, c, n, s in setting:
            output_channel = make_divisible(c * width_mult, round_nearest)
            for i in range(n):
                features.append(InvertedResidual(input_channel, output_channel, s if i == 0 else 1, t, norm_layer))
                input_channel = output_channel
        features.append(Conv2dNormActivation(input_channel, self.last_channel, kernel_size=1,
                                             norm_layer=norm_layer, activation_layer=nn.ReLU6))
        self.features = nn.Sequential(*features)
        self.classifier = nn.Sequential(nn.Dropout(p=dropout), nn.Linear(self.last_channel, num_classes))
        _init_weights(self)

    def forward(self, x):
        x = nn.functional.adaptive_avg_pool2d(self.features(x), (1, 1))
        return self.classifier(rt.flatten(x, 1))


# --- MobileNet V3 ------------------------------------------------------------------------------

@dataclass
class InvertedResidualConfig:
    """One V3 block: widths, kernel, squeeze-excitation, hard-swish ("HS") or ReLU ("RE"), stride."""

    input_channels: int
    kernel: int
    expanded_channels: int
    out_channels: int
    use_se: bool
    activation: str
    stride: int
    dilation: int = 1

    @property
    def use_hs(self) -> bool:
        return self.activation == "HS"

    def scaled(self, width_mult: float) -> "InvertedResidualConfig":
        adjust = partial(_adjust_channels, width_mult=width_mult)
        return InvertedResidualConfig(adjust(self.input_channels), self.kernel, adjust(self.expanded_channels),
                                      adjust(self.out_channels), self.use_se, self.activation, self.stride,
                                      self.dilation)


def _adjust_channels(channels: int, width_mult: float) -> int:
    return make_divisible(channels * width_mult, 8)


class InvertedResidualV3(nn.Module):
    """V3 block: optional 1x1 expand, depthwise kxk, optional SE (hard-sigmoid), linear 1x1 project."""

    def __init__(self, cnf: InvertedResidualConfig, norm_layer):
        super().__init__()
        if not 1 <= cnf.stride <= 2:
            raise ValueError(f"InvertedResidualV3: illegal stride {cnf.stride}")
        self.use_res_connect = cnf.stride == 1 and cnf.input_channels == cnf.out_channels
        activation = nn.Hardswish if cnf.use_hs else nn.ReLU
        layers = []
        if cnf.expanded_channels != cnf.input_channels:
            layers.append(Conv2dNormActivation(cnf.input_channels, cnf.expanded_channels, kernel_size=1,
                                               norm_layer=norm_layer, activation_layer=activation))
        stride = 1 if cnf.dilation > 1 else cnf.stride
        layers.append(Conv2dNormActivation(cnf.expanded_channels, cnf.expanded_channels, kernel_size=cnf.kernel,
                                           stride=stride, dilation=cnf.dilation, groups=cnf.expanded_channels,
                                           norm_layer=norm_layer, activation_layer=activation))
        if cnf.use_se:
            squeeze = make_divisible(cnf.expanded_channels // 4, 8)
            layers.append(SqueezeExcitation(cnf.expanded_channels, squeeze, scale_activation=nn.Hardsigmoid))
        layers.append(Conv2dNormActivation(cnf.expanded_channels, cnf.out_channels, kernel_size=1,
                                           norm_layer=norm_layer, activation_layer=None))
        self.block = nn.Sequential(*layers)
        self.out_channels = cnf.out_channels

    def forward(self, x):
        result = self.block(x)
        return result + x if self.use_res_connect else result


class MobileNetV3(nn.Module):
    """MobileNet V3 with torchvision's module names (features, avgpool, classifier)."""

    def __init__(self, inverted_residual_setting: list, last_channel: int, num_classes: int = 1000,
                 norm_layer=None, dropout: float = 0.2):
        super().__init__()
        if not inverted_residual_setting:
            raise ValueError("MobileNetV3: inverted_residual_setting must not be empty")
        # torchvision uses BN with eps 1e-3 and momentum 0.01 for V3
        norm_layer = norm_layer or partial(nn.BatchNorm2d, eps=0.001, momentum=0.01)
        first = inverted_residual_setting[0].input_channels
        layers = [Conv2dNormActivation(3, first, kernel_size=3, stride=2, norm_layer=norm_layer,
                                       activation_layer=nn.Hardswish)]
        layers += [InvertedResidualV3(cnf, norm_layer) for cnf in inverted_residual_setting]
        last_in = inverted_residual_setting[-1].out_channels
        last_out = 6 * last_in
        layers.append(Conv2dNormActivation(last_in, last_out, kernel_size=1, norm_layer=norm_layer,
                                           activation_layer=nn.Hardswish))
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(
            nn.Linear(last_out, last_channel), nn.Hardswish(inplace=True),
            nn.Dropout(p=dropout, inplace=True), nn.Linear(last_channel, num_classes),
        )
        _init_weights(self)

    def forward(self, x):
        x = self.avgpool(self.features(x))
        return self.classifier(rt.flatten(x, 1))


# input, kernel, expanded, output, SE, activation, stride; then the penultimate width
_V3_SETTINGS = {
    "mobilenet_v3_large": ((
        (16, 3, 16, 16, False, "RE", 1),
        (16, 3, 64, 24, False, "RE", 2),
        (24, 3, 72, 24, False, "RE", 1),
        (24, 5, 72, 40, True, "RE", 2),
        (40, 5, 120, 40, True, "RE", 1),
        (40, 5, 120, 40, True, "RE", 1),
        (40, 3, 240, 80, False, "HS", 2),
        (80, 3, 200, 80, False, "HS", 1),
        (80, 3, 184, 80, False, "HS", 1),
        (80, 3, 184, 80, False, "HS", 1),
        (80, 3, 480, 112, True, "HS", 1),
        (112, 3, 672, 112, True, "HS", 1),
        (112, 5, 672, 160, True, "HS", 2),
        (160, 5, 960, 160, True, "HS", 1),
        (160, 5, 960, 160, True, "HS", 1),
    ), 1280),
    "mobilenet_v3_small": ((
        (16, 3, 16, 16, True, "RE", 2),
        (16, 3, 72, 24, False, "RE", 2),
        (24, 3, 88, 24, False, "RE", 1),
        (24, 5, 96, 40, True, "HS", 2),
        (40, 5, 240, 40, True, "HS", 1),
        (40, 5, 240, 40, True, "HS", 1),
        (40, 5, 120, 48, True, "HS", 1),
        (48, 5, 144, 48, True, "HS", 1),
        (48, 5, 288, 96, True, "HS", 2),
        (96, 5, 576, 96, True, "HS", 1),
        (96, 5, 576, 96, True, "HS", 1),
    ), 1024),
}


def mobilenet_v3(arch: str, width_mult: float = 1.0, num_classes: int = 1000, dropout: float = 0.2) -> MobileNetV3:
    """MobileNet V3 ``arch`` ("mobilenet_v3_large" or "mobilenet_v3_small") at ``width_mult``."""
    try:
        rows, last_channel = _V3_SETTINGS[arch]
    except KeyError:
        raise ValueError(f"mobilenet_v3: unknown arch {arch!r}; one of {sorted(_V3_SETTINGS)}") from None
    setting = [InvertedResidualConfig(*row).scaled(width_mult) for row in rows]
    return MobileNetV3(setting, _adjust_channels(last_channel, width_mult), num_classes, dropout=dropout)


register_model("mobilenet_v2", family="mobilenet", inputs=image_input(), params=3_504_872,
               description="MobileNet V2 (torchvision)")(MobileNetV2)
register_model("mobilenet_v3_large", family="mobilenet", inputs=image_input(), params=5_483_032,
               description="MobileNet V3 large (torchvision)", arch="mobilenet_v3_large")(mobilenet_v3)
register_model("mobilenet_v3_small", family="mobilenet", inputs=image_input(), params=2_542_856,
               description="MobileNet V3 small (torchvision)", arch="mobilenet_v3_small")(mobilenet_v3)
