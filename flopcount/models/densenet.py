"""DenseNet-BC as torchvision builds it."""

from __future__ import annotations

from collections import OrderedDict

from ..runtime import Tensor, cat, flatten, nn
from ..runtime.nn import functional as F
from ..runtime.nn import init
from ._registry import image_input, register_model

__all__ = ["DenseNet", "densenet"]


class _DenseLayer(nn.Module):
    """BN-ReLU-1x1 conv (bottleneck) then BN-ReLU-3x3 conv, on the concatenation of all earlier features."""

    def __init__(self, num_input_features: int, growth_rate: int, bn_size: int, drop_rate: float) -> None:
        super().__init__()
        self.norm1 = nn.BatchNorm2d(num_input_features)
        self.relu1 = nn.ReLU(inplace=True)
        self.conv1 = nn.Conv2d(num_input_features, bn_size * growth_rate, kernel_size=1, stride=1, bias=False)
        self.norm2 = nn.BatchNorm2d(bn_size * growth_rate)
        self.relu2 = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(bn_size * growth_rate, growth_rate, kernel_size=3, stride=1, padding=1, bias=False)
        self.drop_rate = float(drop_rate)

    def forward(self, inputs):
        features = [inputs] if isinstance(inputs, Tensor) else inputs
        bottleneck = self.conv1(self.relu1(self.norm1(cat(features, 1))))
        new_features = self.conv2(self.relu2(self.norm2(bottleneck)))
        if self.drop_rate > 0:
            new_features = F.dropout(new_features, p=self.drop_rate, training=self.training)
        return new_features


class _DenseBlock(nn.ModuleDict):
    """``num_layers`` dense layers, each seeing every earlier output; returns them all concatenated."""

    def __init__(self, num_layers: int, num_input_features: int, bn_size: int, growth_rate: int,
                 drop_rate: float) -> None:
        super().__init__()
        for i in range(num_layers):
            self.add_module(f"denselayer{i + 1}", _DenseLayer(num_input_features + i * growth_rate,
                                                              growth_rate, bn_size, drop_rate))

    def forward(self, init_features):
        features = [init_features]
        for layer in self.values():
            features.append(layer(features))
        return cat(features, 1)


class _Transition(nn.Sequential):
    """BN-ReLU-1x1 conv halving the channels, then a 2x2 average pool."""

    def __init__(self, num_input_features: int, num_output_features: int) -> None:
        super().__init__()
        self.norm = nn.BatchNorm2d(num_input_features)
        self.relu = nn.ReLU(inplace=True)
        self.conv = nn.Conv2d(num_input_features, num_output_features, kernel_size=1, stride=1, bias=False)
        self.pool = nn.AvgPool2d(kernel_size=2, stride=2)


class DenseNet(nn.Module):
    """torchvision's DenseNet-BC.

    ``memory_efficient`` (gradient checkpointing in torchvision) only trades memory for time and
    is not available here: it must stay False.

    >>> import flopcount.runtime as rt
    >>> with rt.meta():
    ...     DenseNet(block_config=(2, 2, 2, 2))(rt.empty(1, 3, 64, 64)).shape
    (1, 1000)
    """

    def __init__(self, growth_rate: int = 32, block_config: tuple = (6, 12, 24, 16), num_init_features: int = 64,
                 bn_size: int = 4, drop_rate: float = 0, num_classes: int = 1000,
                 memory_efficient: bool = False) -> None:
        super().__init__()
        if memory_efficient:
            raise NotImplementedError("DenseNet: memory_efficient=True (checkpointing) is not supported")
        self.features = nn.Sequential(OrderedDict([
            ("conv0", nn.Conv2d(3, num_init_features, kernel_size=7, stride=2, padding=3, bias=False)),
            ("norm0", nn.BatchNorm2d(num_init_features)),
            ("relu0", nn.ReLU(inplace=True)),
            ("pool0", nn.MaxPool2d(kernel_size=3, stride=2, padding=1)),
        ]))
        num_features = num_init_features
        for i, num_layers in enumerate(block_config):
            self.features.add_module(f"denseblock{i + 1}", _DenseBlock(num_layers, num_features, bn_size,
                                                                       growth_rate, drop_rate))
            num_features += num_layers * growth_rate
            if i != len(block_config) - 1:
                self.features.add_module(f"transition{i + 1}", _Transition(num_features, num_features // 2))
                num_features //= 2
        self.features.add_module("norm5", nn.BatchNorm2d(num_features))
        self.classifier = nn.Linear(num_features, num_classes)
        # torchvision: He normal (fan_in) convs, norms 1 / 0, linear bias 0 (weight keeps its default)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                init.kaiming_normal_(m.weight)
            elif isinstance(m, nn.BatchNorm2d):
                init.constant_(m.weight, 1)
                init.constant_(m.bias, 0)
            elif isinstance(m, nn.Linear):
                init.constant_(m.bias, 0)

    def forward(self, x):
        out = F.relu(self.features(x), inplace=True)
        out = F.adaptive_avg_pool2d(out, (1, 1))
        return self.classifier(flatten(out, 1))


def densenet(growth_rate: int = 32, block_config=(6, 12, 24, 16), num_init_features: int = 64, **kwargs) -> DenseNet:
    """A DenseNet-BC; arguments go to :class:`DenseNet`."""
    return DenseNet(growth_rate, tuple(block_config), num_init_features, **kwargs)


# name: (growth rate, layers per block, stem channels, torchvision's published parameter count)
for _name, (_growth, _blocks, _init, _params) in {"densenet121": (32, (6, 12, 24, 16), 64, 7_978_856)}.items():
    register_model(_name, family="densenet", inputs=image_input(), params=_params, growth_rate=_growth,
                   block_config=_blocks, num_init_features=_init, description=f"{_name} (torchvision)")(densenet)
