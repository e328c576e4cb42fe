"""EfficientNet (Tan and Le, 2019), module for module as torchvision builds it.

The network is a table of MBConv stages scaled by a width and a depth multiplier:

    net = flopcount.models.get("efficientnet_b0")
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import partial

import flopcount.runtime as rt
from flopcount.runtime import nn

from ._blocks import Conv2dNormActivation, SqueezeExcitation, StochasticDepth, he_fan_out_init_, make_divisible
from ._registry import image_input, register_model

__all__ = ["EfficientNet", "MBConv", "MBConvConfig", "efficientnet"]


@dataclass
class MBConvConfig:
    """One stage: expansion ratio, kernel, stride of its first block, widths and block count."""

    expand_ratio: float
    kernel: int
    stride: int
    input_channels: int
    out_channels: int
    num_layers: int

    @staticmethod
    def adjust_channels(channels: float, width_mult: float) -> int:
        return make_divisible(channels * width_mult, 8)

    def scaled(self, width_mult: float, depth_mult: float) -> "MBConvConfig":
        """The stage widened by ``width_mult`` (rounded to 8) and deepened by ``depth_mult`` (ceil)."""
        return replace(self, input_channels=self.adjust_channels(self.input_channels, width_mult),
                       out_channels=self.adjust_channels(self.out_channels, width_mult),
                       num_layers=int(math.ceil(self.num_layers * depth_mult)))


class MBConv(nn.Module):
    """Inverted residual: 1x1 expand, depthwise kxk, squeeze-excitation, 1x1 project (+ residual)."""

    def __init__(self, cnf: MBConvConfig, stochastic_depth_prob: float, norm_layer=nn.BatchNorm2d):
        super().__init__()
        if not 1 <= cnf.stride <= 2:
            raise ValueError(f"MBConv: illegal stride {cnf.stride}")
        self.use_res_connect = cnf.stride == 1 and cnf.input_channels == cnf.out_channels
        layers = []
        expanded = cnf.adjust_channels(cnf.input_channels, cnf.expand_ratio)
        if expanded != cnf.input_channels:
            layers.append(Conv2dNormActivation(cnf.input_channels, expanded, kernel_size=1,
                                               norm_layer=norm_layer, activation_layer=nn.SiLU))
        layers.append(Conv2dNormActivation(expanded, expanded, kernel_size=cnf.kernel, stride=cnf.stride,
                                           groups=expanded, norm_layer=norm_layer, activation_layer=nn.SiLU))
        squeeze = max(1, cnf.input_channels // 4)
        layers.append(SqueezeExcitation(expanded, squeeze, activation=partial(nn.SiLU, inplace=True)))
        layers.append(Conv2dNormActivation(expanded, cnf.out_channels, kernel_size=1, norm_layer=norm_layer,
                                           activation_layer=None))
        self.block = nn.Sequential(*layers)
        self.stochastic_depth = StochasticDepth(stochastic_depth_prob, "row")
        self.out_channels = cnf.out_channels

    def forward(self, x):
        result = self.block(x)
        if self.use_res_connect:
            result = self.stochastic_depth(result) + x
        return result


def _uniform_linear_init_(m: nn.Module) -> None:
    # EfficientNet's classifier: U(±1/sqrt(out_features)), bias zero
    init_range = 1.0 / math.sqrt(m.out_features)
    nn.init.uniform_(m.weight, -init_range, init_range)
    nn.init.zeros_(m.bias)


class EfficientNet(nn.Module):
    """EfficientNet with torchvision's module names (features.0..8, avgpool, classifier)."""

    def __init__(self, inverted_residual_setting: list, dropout: float, stochastic_depth_prob: float = 0.2,
                 num_classes: int = 1000, norm_layer=None, last_channel: int | None = None):
        super().__init__()
        if not inverted_residual_setting:
            raise ValueError("EfficientNet: inverted_residual_setting must not be empty")
        norm_layer = norm_layer or nn.BatchNorm2d
        first = inverted_residual_setting[0].input_channels
        layers = [Conv2dNormActivation(3, first, kernel_size=3, stride=2, norm_layer=norm_layer,
                                       activation_layer=nn.SiLU)]
        total_blocks = sum(cnf.num_layers for cnf in inverted_residual_setting)
        block_id = 0
        for cnf in inverted_residual_setting:
            stage = []
            for i in range(cnf.num_layers):
                block_cnf = cnf if i == 0 else replace(cnf, input_channels=cnf.out_channels, stride=1)
                # the drop probability grows linearly with the block's depth in the network
                sd_prob = stochastic_depth_prob * float(block_id) / total_blocks
                stage.append(MBConv(block_cnf, sd_prob, norm_layer))
                block_id += 1
            layers.append(nn.Sequential(*stage))
        last_in = inverted_residual_setting[-1].out_channels
        last_out = last_channel if last_channel is not None else 4 * last_in
        layers.append(Conv2dNormActivation(last_in, last_out, kernel_size=1, norm_layer=norm_layer,
                                           activation_layer=nn.SiLU))
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(nn.Dropout(p=dropout, inplace=True), nn.Linear(last_out, num_classes))
        he_fan_out_init_(self, linear=_uniform_linear_init_)

    def forward(self, x):
        x = self.avgpool(self.features(x))
        return self.classifier(rt.flatten(x, 1))


# EfficientNet-B0's stages: expand ratio, kernel, stride, input and output channels, blocks
_B0_STAGES = (
    (1, 3, 1, 32, 16, 1),
    (6, 3, 2, 16, 24, 2),
    (6, 5, 2, 24, 40, 2),
    (6, 3, 2, 40, 80, 3),
    (6, 5, 1, 80, 112, 3),
    (6, 5, 2, 112, 192, 4),
    (6, 3, 1, 192, 320, 1),
)


def efficientnet(width_mult: float, depth_mult: float, dropout: float, stochastic_depth_prob: float = 0.2,
                 num_classes: int = 1000) -> EfficientNet:
    """EfficientNet-B* from the B0 stage table and the compound scaling multipliers."""
    setting = [MBConvConfig(*stage).scaled(width_mult, depth_mult) for stage in _B0_STAGES]
    return EfficientNet(setting, dropout, stochastic_depth_prob, num_classes)


register_model("efficientnet_b0", family="efficientnet", inputs=image_input(), params=5_288_548,
               description="EfficientNet-B0 (torchvision)",
               width_mult=1.0, depth_mult=1.0, dropout=0.2)(efficientnet)
