"""RegNet X and Y (Radosavovic et al., 2020), module for module as torchvision builds them.

A RegNet is given by a handful of numbers (depth, w_0, w_a, w_m, group width, SE ratio); the
per-stage widths and depths follow from them by the paper's quantized linear rule:

    BlockParams.from_init_params(depth=27, w_0=48, w_a=20.71, w_m=2.65, group_width=24).depths
    # [2, 6, 17, 2]
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from flopcount.runtime import nn

from ._blocks import Conv2dNormActivation, SqueezeExcitation, make_divisible
from ._registry import image_input, register_model

__all__ = ["RegNet", "BlockParams", "regnet"]


@dataclass
class BlockParams:
    """Per-stage settings of a RegNet: depth, output width, group width, bottleneck ratio, stride."""

    depths: list
    widths: list
    group_widths: list
    bottleneck_multipliers: list
    strides: list
    se_ratio: float | None = None

    @classmethod
    def from_init_params(cls, depth: int, w_0: int, w_a: float, w_m: float, group_width: int,
                         bottleneck_multiplier: float = 1.0, se_ratio: float | None = None) -> "BlockParams":
        """Stage settings from the design-space parameters (the paper's section 3.3).

        Block j gets width ``w_0 + w_a * j``, snapped in log space to ``w_0 * w_m ** k`` and to a
        multiple of 8; consecutive blocks of equal width form a stage.
        """
        if w_a < 0 or w_0 <= 0 or w_m <= 1 or w_0 % 8:
            raise ValueError(f"RegNet: invalid settings w_0={w_0}, w_a={w_a}, w_m={w_m}")
        # float32 like the reference, so widths on a rounding boundary snap the same way
        widths_cont = np.arange(depth, dtype=np.float32) * np.float32(w_a) + np.float32(w_0)
        capacity = np.round(np.log(widths_cont / np.float32(w_0)) / np.float32(math.log(w_m)))
        block_widths = (np.round(np.float32(w_0) * np.power(np.float32(w_m), capacity) / 8) * 8).astype(int).tolist()
        stage_widths, stage_depths = [], []
        for w in block_widths:
            if stage_widths and stage_widths[-1] == w:
                stage_depths[-1] += 1
            else:
                stage_widths.append(w)
                stage_depths.append(1)
        n = len(stage_widths)
        multipliers = [bottleneck_multiplier] * n
        stage_widths, group_widths = _adjust_widths_groups(stage_widths, multipliers, [group_width] * n)
        return cls(stage_depths, stage_widths, group_widths, multipliers, [2] * n, se_ratio)


def _adjust_widths_groups(widths, multipliers, group_widths):
    """Make each stage's bottleneck width a multiple of its (possibly reduced) group width."""
    bottleneck = [int(w * b) for w, b in zip(widths, multipliers)]
    group_widths = [min(g, w) for g, w in zip(group_widths, bottleneck)]
    bottleneck = [make_divisible(w, g) for w, g in zip(bottleneck, group_widths)]
    return [int(w / b) for w, b in zip(bottleneck, multipliers)], group_widths


class BottleneckTransform(nn.Sequential):
    """1x1 (a), grouped 3x3 (b), optional squeeze-excitation (se), 1x1 (c)."""

    def __init__(self, width_in: int, width_out: int, stride: int, group_width: int,
                 bottleneck_multiplier: float, se_ratio: float | None):
        w_b = int(round(width_out * bottleneck_multiplier))
        layers = OrderedDict()
        layers["a"] = Conv2dNormActivation(width_in, w_b, kernel_size=1)
        layers["b"] = Conv2dNormActivation(w_b, w_b, kernel_size=3, stride=stride, groups=w_b // group_width)
        if se_ratio:
            # the squeeze width follows the block's input width, as in the paper's code
            layers["se"] = SqueezeExcitation(w_b, int(round(se_ratio * width_in)), activation=nn.ReLU)
        layers["c"] = Conv2dNormActivation(w_b, width_out, kernel_size=1, activation_layer=None)
        super().__init__(layers)


class ResBottleneckBlock(nn.Module):
    """relu(proj(x) + f(x)), with a 1x1 projection when the width or resolution changes."""

    def __init__(self, width_in: int, width_out: int, stride: int, group_width: int = 1,
                 bottleneck_multiplier: float = 1.0, se_ratio: float | None = None):
        super().__init__()
        self.proj = None
        if width_in != width_out or stride != 1:
            self.proj = Conv2dNormActivation(width_in, width_out, kernel_size=1, stride=stride,
                                             activation_layer=None)
        self.f = BottleneckTransform(width_in, width_out, stride, group_width, bottleneck_multiplier, se_ratio)
        self.activation = nn.ReLU(inplace=True)

    def forward(self, x):
        shortcut = self.proj(x) if self.proj is not None else x
        return self.activation(shortcut + self.f(x))


class AnyStage(nn.Sequential):
    """``depth`` blocks named ``block{stage}-{i}``; the first one changes width and stride."""

    def __init__(self, width_in: int, width_out: int, stride: int, depth: int, group_width: int,
                 bottleneck_multiplier: float, se_ratio: float | None, stage_index: int):
        super().__init__()
        for i in range(depth):
            block = ResBottleneckBlock(width_in if i == 0 else width_out, width_out, stride if i == 0 else 1,
                                       group_width, bottleneck_multiplier, se_ratio)
            self.add_module(f"block{stage_index}-{i}", block)


class RegNet(nn.Module):
    """RegNet with torchvision's module names (stem, trunk_output.block1..., avgpool, fc)."""

    def __init__(self, block_params: BlockParams, num_classes: int = 1000, stem_width: int = 32):
        super().__init__()
        self.stem = Conv2dNormActivation(3, stem_width, kernel_size=3, stride=2)
        current = stem_width
        stages = OrderedDict()
        settings = zip(block_params.widths, block_params.strides, block_params.depths,
                       block_params.group_widths, block_params.bottleneck_multipliers)
        for i, (width, stride, depth, group_width, multiplier) in enumerate(settings, 1):
            stages[f"block{i}"] = AnyStage(current, width, stride, depth, group_width, multiplier,
                                           block_params.se_ratio, stage_index=i)
            current = width
        self.trunk_output = nn.Sequential(stages)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(current, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                fan_out = m.kernel_size[0] * m.kernel_size[1] * m.out_channels
                nn.init.normal_(m.weight, mean=0.0, std=math.sqrt(2.0 / fan_out))
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, mean=0.0, std=0.01)
                nn.init.zeros_(m.bias)

    def forward(self, x):
        x = self.trunk_output(self.stem(x))
        x = self.avgpool(x).flatten(1)
        return self.fc(x)


def regnet(depth: int, w_0: int, w_a: float, w_m: float, group_width: int, se_ratio: float | None = None,
           bottleneck_multiplier: float = 1.0, num_classes: int = 1000) -> RegNet:
    """A RegNet from its design-space parameters (torchvision's ``regnet_*`` constructors)."""
    params = BlockParams.from_init_params(depth, w_0, w_a, w_m, group_width, bottleneck_multiplier, se_ratio)
    return RegNet(params, num_classes=num_classes)


# name: design-space parameters (torchvision's values) and the published parameter count
_CONFIGS = {
    "regnet_y_1_6gf": (dict(depth=27, w_0=48, w_a=20.71, w_m=2.65, group_width=24, se_ratio=0.25), 11_202_430),
    "regnet_x_16gf": (dict(depth=22, w_0=216, w_a=55.59, w_m=2.1, group_width=128), 54_278_536),
}

for _name, (_config, _params) in _CONFIGS.items():
    register_model(_name, family="regnet", inputs=image_input(), params=_params,
                   description="RegNet (torchvision)", **_config)(regnet)
