"""ShuffleNet V2 (Ma et al., 2018), module for module as torchvision builds it.

    net = flopcount.models.get("shufflenet_v2_x1_0")
"""

from __future__ import annotations

from typing import Sequence

import flopcount.runtime as rt
from flopcount.runtime import nn

from ._registry import image_input, register_model

__all__ = ["ShuffleNetV2", "InvertedResidual", "channel_shuffle"]


def channel_shuffle(x, groups: int):
    """Interleave the channels of ``groups`` groups: (N, g*c, H, W) -> view (N, g, c) -> (N, c, g)."""
    n, channels, h, w = x.shape
    x = x.reshape(n, groups, channels // groups, h, w)
    x = rt.transpose(x, 1, 2).contiguous()
    return x.reshape(n, channels, h, w)


def _depthwise_conv(channels: int, stride: int):
    return nn.Conv2d(channels, channels, 3, stride, 1, bias=False, groups=channels)


class InvertedResidual(nn.Module):
    """ShuffleNet V2 unit: split (stride 1) or duplicate (stride 2), two branches, concat, shuffle."""

    def __init__(self, inp: int, oup: int, stride: int):
        super().__init__()
        if not 1 <= stride <= 3:
            raise ValueError(f"InvertedResidual: illegal stride {stride}")
        self.stride = stride
        branch_features = oup // 2
        if stride == 1 and inp != branch_features << 1:
            raise ValueError(f"InvertedResidual: stride 1 needs inp == oup (got inp {inp}, oup {oup})")
        self.branch1 = nn.Sequential(
            _depthwise_conv(inp, stride), nn.BatchNorm2d(inp),
            nn.Conv2d(inp, branch_features, 1, 1, 0, bias=False), nn.BatchNorm2d(branch_features),
            nn.ReLU(inplace=True),
        ) if stride > 1 else nn.Sequential()
        self.branch2 = nn.Sequential(
            nn.Conv2d(inp if stride > 1 else branch_features, branch_features, 1, 1, 0, bias=False),
            nn.BatchNorm2d(branch_features), nn.ReLU(inplace=True),
            _depthwise_conv(branch_features, stride), nn.BatchNorm2d(branch_features),
            nn.Conv2d(branch_features, branch_features, 1, 1, 0, bias=False),
            nn.BatchNorm2d(branch_features), nn.ReLU(inplace=True),
        )

    def forward(self, x):
        if self.stride == 1:
            x1, x2 = x.chunk(2, dim=1)
            out = rt.cat([x1, self.branch2(x2)], dim=1)
        else:
            out = rt.cat([self.branch1(x), self.branch2(x)], dim=1)
        return channel_shuffle(out, 2)


class ShuffleNetV2(nn.Module):
    """ShuffleNet V2 with torchvision's module names (conv1, maxpool, stage2-4, conv5, fc)."""

    def __init__(self, stages_repeats: Sequence[int], stages_out_channels: Sequence[int],
                 num_classes: int = 1000):
        super().__init__()
        if len(stages_repeats) != 3:
            raise ValueError(f"ShuffleNetV2: expected 3 stage repeats, got {list(stages_repeats)}")
        if len(stages_out_channels) != 5:
            raise ValueError(f"ShuffleNetV2: expected 5 stage widths, got {list(stages_out_channels)}")
        self._stage_out_channels = list(stages_out_channels)
        input_channels = 3
        output_channels = stages_out_channels[0]
        self.conv1 = nn.Sequential(
            nn.Conv2d(input_channels, output_channels, 3, 2, 1, bias=False),
            nn.BatchNorm2d(output_channels), nn.ReLU(inplace=True),
        )
        input_channels = output_channels
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        for i, (repeats, output_channels) in enumerate(zip(stages_repeats, stages_out_channels[1:]), 2):
            units = [InvertedResidual(input_channels, output_channels, 2)]
            units += [InvertedResidual(output_channels, output_channels, 1) for _ in range(repeats - 1)]
            setattr(self, f"stage{i}", nn.Sequential(*units))
            input_channels = output_channels
        output_channels = stages_out_channels[-1]
        self.conv5 = nn.Sequential(
            nn.Conv2d(input_channels, output_channels, 1, 1, 0, bias=False),
            nn.BatchNorm2d(output_channels), nn.ReLU(inplace=True),
        )
        self.fc = nn.Linear(output_channels, num_classes)
        # torchvision keeps PyTorch's default layer initialization for ShuffleNet V2.

    def forward(self, x):
        x = self.maxpool(self.conv1(x))
        x = self.stage4(self.stage3(self.stage2(x)))
        x = self.conv5(x)
        x = x.mean([2, 3])  # global average pool
        return self.fc(x)


# name: (stages_repeats, stages_out_channels, torchvision's published parameter count)
_CONFIGS = {
    "shufflenet_v2_x0_5": ((4, 8, 4), (24, 48, 96, 192, 1024), 1_366_792),
    "shufflenet_v2_x1_0": ((4, 8, 4), (24, 116, 232, 464, 1024), 2_278_604),
}

for _name, (_repeats, _channels, _params) in _CONFIGS.items():
    register_model(_name, family="shufflenet", inputs=image_input(), params=_params,
                   description="ShuffleNet V2 (torchvision)",
                   stages_repeats=_repeats, stages_out_channels=_channels)(ShuffleNetV2)
