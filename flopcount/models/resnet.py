"""ResNet, ResNeXt and Wide ResNet as torchvision builds them (v1.5: stride on the 3x3 conv).

The project's golden numbers depend on resnet50 being exactly torchvision's: 25,557,032
parameters and, at 1x3x224x224, 4,089,184,256 conv + linear MACs.
"""

from __future__ import annotations

from typing import Callable

from ..runtime import flatten, nn
from ..runtime.nn import init
from ._blocks import he_fan_out_init_
from ._registry import image_input, register_model

__all__ = ["BasicBlock", "Bottleneck", "ResNet", "resnet", "conv1x1", "conv3x3"]

# name: (block, blocks per stage, extra config, torchvision's published parameter count)
_VARIANTS = {
    "resnet18": ("basic", (2, 2, 2, 2), {}, 11_689_512),
    "resnet34": ("basic", (3, 4, 6, 3), {}, 21_797_672),
    "resnet50": ("bottleneck", (3, 4, 6, 3), {}, 25_557_032),
    "resnet101": ("bottleneck", (3, 4, 23, 3), {}, 44_549_160),
    "resnet152": ("bottleneck", (3, 8, 36, 3), {}, 60_192_808),
    "resnext50_32x4d": ("bottleneck", (3, 4, 6, 3), {"groups": 32, "width_per_group": 4}, 25_028_904),
    "wide_resnet50_2": ("bottleneck", (3, 4, 6, 3), {"width_per_group": 64 * 2}, 68_883_240),
}


def conv3x3(in_planes: int, out_planes: int, stride: int = 1, groups: int = 1, dilation: int = 1) -> nn.Conv2d:
    """3x3 convolution without bias, padded to keep the size (at stride 1)."""
    return nn.Conv2d(in_planes, out_planes, kernel_size=3, stride=stride, padding=dilation, groups=groups,
                     bias=False, dilation=dilation)


def conv1x1(in_planes: int, out_planes: int, stride: int = 1) -> nn.Conv2d:
    """1x1 convolution without bias."""
    return nn.Conv2d(in_planes, out_planes, kernel_size=1, stride=stride, bias=False)


class BasicBlock(nn.Module):
    """Two 3x3 convs and a residual connection (ResNet-18/34)."""

    expansion: int = 1

    def __init__(self, inplanes: int, planes: int, stride: int = 1, downsample: nn.Module | None = None,
                 groups: int = 1, base_width: int = 64, dilation: int = 1,
                 norm_layer: Callable[..., nn.Module] | None = None) -> None:
        super().__init__()
        norm_layer = norm_layer or nn.BatchNorm2d
        if groups != 1 or base_width != 64:
            raise ValueError("BasicBlock only supports groups=1 and base_width=64")
        if dilation > 1:
            raise NotImplementedError("Dilation > 1 not supported in BasicBlock")
        self.conv1 = conv3x3(inplanes, planes, stride)
        self.bn1 = norm_layer(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = conv3x3(planes, planes)
        self.bn2 = norm_layer(planes)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        identity = x if self.downsample is None else self.downsample(x)
        return self.relu(out + identity)


class Bottleneck(nn.Module):
    """1x1 reduce, 3x3 (carrying the stride: ResNet v1.5), 1x1 expand, and a residual connection."""

    expansion: int = 4

    def __init__(self, inplanes: int, planes: int, stride: int = 1, downsample: nn.Module | None = None,
                 groups: int = 1, base_width: int = 64, dilation: int = 1,
                 norm_layer: Callable[..., nn.Module] | None = None) -> None:
        super().__init__()
        norm_layer = norm_layer or nn.BatchNorm2d
        width = int(planes * (base_width / 64.0)) * groups
        self.conv1 = conv1x1(inplanes, width)
        self.bn1 = norm_layer(width)
        self.conv2 = conv3x3(width, width, stride, groups, dilation)
        self.bn2 = norm_layer(width)
        self.conv3 = conv1x1(width, planes * self.expansion)
        self.bn3 = norm_layer(planes * self.expansion)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        identity = x if self.downsample is None else self.downsample(x)
        return self.relu(out + identity)


_BLOCKS = {"basic": BasicBlock, "bottleneck": Bottleneck}


class ResNet(nn.Module):
    """torchvision's ResNet: a 7x7 stem, four stages of residual blocks, global pool, one linear.

    ``block`` is a block class or its name ("basic", "bottleneck").

    >>> import flopcount.runtime as rt
    >>> with rt.meta():
    ...     ResNet("basic", [2, 2, 2, 2])(rt.empty(1, 3, 224, 224)).shape
    (1, 1000)
    """

    def __init__(self, block, layers: list[int], num_classes: int = 1000, zero_init_residual: bool = False,
                 groups: int = 1, width_per_group: int = 64,
                 replace_stride_with_dilation: list[bool] | None = None,
                 norm_layer: Callable[..., nn.Module] | None = None) -> None:
        super().__init__()
        block = _BLOCKS[block] if isinstance(block, str) else block
        self._norm_layer = norm_layer or nn.BatchNorm2d
        self.inplanes = 64
        self.dilation = 1
        if replace_stride_with_dilation is None:
            replace_stride_with_dilation = [False, False, False]
        if len(replace_stride_with_dilation) != 3:
            raise ValueError("replace_stride_with_dilation should be None "
                             f"or a 3-element tuple, got {replace_stride_with_dilation}")
        self.groups = groups
        self.base_width = width_per_group
        self.conv1 = nn.Conv2d(3, self.inplanes, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = self._norm_layer(self.inplanes)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.layer1 = self._make_layer(block, 64, layers[0])
        self.layer2 = self._make_layer(block, 128, layers[1], stride=2, dilate=replace_stride_with_dilation[0])
        self.layer3 = self._make_layer(block, 256, layers[2], stride=2, dilate=replace_stride_with_dilation[1])
        self.layer4 = self._make_layer(block, 512, layers[3], stride=2, dilate=replace_stride_with_dilation[2])
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512 * block.expansion, num_classes)
        self._init_weights(zero_init_residual)

    def _init_weights(self, zero_init_residual: bool) -> None:
        # torchvision: He normal (fan_out) convs, norms 1 / 0, the fc keeps Linear's default;
        # optionally the last norm of each block starts at 0 so every block begins as identity
        he_fan_out_init_(self)
        if zero_init_residual:
            for m in self.modules():
                if isinstance(m, Bottleneck) and m.bn3.weight is not None:
                    init.constant_(m.bn3.weight, 0)
                elif isinstance(m, BasicBlock) and m.bn2.weight is not None:
                    init.constant_(m.bn2.weight, 0)

    def _make_layer(self, block, planes: int, blocks: int, stride: int = 1, dilate: bool = False) -> nn.Sequential:
        norm_layer = self._norm_layer
        downsample = None
        previous_dilation = self.dilation
        if dilate:
            self.dilation *= stride
            stride = 1
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(conv1x1(self.inplanes, planes * block.expansion, stride),
                                       norm_layer(planes * block.expansion))
        layers = [block(self.inplanes, planes, stride, downsample, self.groups, self.base_width,
                        previous_dilation, norm_layer)]
        self.inplanes = planes * block.expansion
        for _ in range(1, blocks):
            layers.append(block(self.inplanes, planes, groups=self.groups, base_width=self.base_width,
                                dilation=self.dilation, norm_layer=norm_layer))
        return nn.Sequential(*layers)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(flatten(self.avgpool(x), 1))


def resnet(block: str = "bottleneck", layers=(3, 4, 6, 3), **kwargs) -> ResNet:
    """A ResNet of ``block`` ("basic" or "bottleneck") and blocks per stage ``layers``."""
    return ResNet(block, list(layers), **kwargs)


for _name, (_block, _layers, _extra, _params) in _VARIANTS.items():
    register_model(_name, family="resnet", inputs=image_input(), params=_params, block=_block,
                   layers=_layers, description=f"{_name} (torchvision)", **_extra)(resnet)
