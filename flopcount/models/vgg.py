"""VGG as torchvision builds it: layer lists as data, with or without batch norm."""

from __future__ import annotations

from ..runtime import flatten, nn
from ._blocks import he_fan_out_init_, normal_linear_init_
from ._registry import image_input, register_model

__all__ = ["VGG", "make_layers", "CFGS", "vgg"]

# The paper's configurations: output channels of each 3x3 conv, "M" a 2x2 max pool.
CFGS: dict[str, list] = {
    "A": [64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"],
    "B": [64, 64, "M", 128, 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"],
    "D": [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"],
    "E": [64, 64, "M", 128, 128, "M", 256, 256, 256, 256, "M", 512, 512, 512, 512, "M",
          512, 512, 512, 512, "M"],
}

# name: (configuration, batch norm, torchvision's published parameter count)
_VARIANTS = {
    "vgg11": ("A", False, 132_863_336),
    "vgg11_bn": ("A", True, 132_868_840),
    "vgg16": ("D", False, 138_357_544),
    "vgg16_bn": ("D", True, 138_365_992),
}


class VGG(nn.Module):
    """``features`` (see :func:`make_layers`), a 7x7 adaptive average pool, three linear layers.

    >>> import flopcount.runtime as rt
    >>> with rt.meta():
    ...     net = VGG(make_layers(CFGS["A"]))
    ...     net(rt.empty(1, 3, 224, 224)).shape
    (1, 1000)
    """

    def __init__(self, features: nn.Module, num_classes: int = 1000, init_weights: bool = True,
                 dropout: float = 0.5) -> None:
        super().__init__()
        self.features = features
        self.avgpool = nn.AdaptiveAvgPool2d((7, 7))
        self.classifier = nn.Sequential(
            nn.Linear(512 * 7 * 7, 4096),
            nn.ReLU(True),
            nn.Dropout(p=dropout),
            nn.Linear(4096, 4096),
            nn.ReLU(True),
            nn.Dropout(p=dropout),
            nn.Linear(4096, num_classes),
        )
        if init_weights:
            self._init_weights()

    def _init_weights(self) -> None:
        # torchvision's scheme: He normal (fan_out) convs, N(0, 0.01) linears, zero biases
        he_fan_out_init_(self, linear=normal_linear_init_)

    def forward(self, x):
        x = self.avgpool(self.features(x))
        return self.classifier(flatten(x, 1))


def make_layers(cfg: list, batch_norm: bool = False) -> nn.Sequential:
    """The convolutional trunk of a VGG configuration (3x3 convs, padding 1; "M" max pools)."""
    layers: list = []
    in_channels = 3
    for v in cfg:
        if v == "M":
            layers.append(nn.MaxPool2d(kernel_size=2, stride=2))
            continue
        layers.append(nn.Conv2d(in_channels, v, kernel_size=3, padding=1))
        if batch_norm:
            layers.append(nn.BatchNorm2d(v))
        layers.append(nn.ReLU(inplace=True))
        in_channels = v
    return nn.Sequential(*layers)


def vgg(cfg: str = "D", batch_norm: bool = False, **kwargs) -> VGG:
    """A VGG of configuration ``cfg`` (a key of :data:`CFGS`); other arguments go to :class:`VGG`."""
    return VGG(make_layers(CFGS[cfg], batch_norm=batch_norm), **kwargs)


for _name, (_cfg, _bn, _params) in _VARIANTS.items():
    register_model(_name, family="vgg", inputs=image_input(), params=_params, cfg=_cfg, batch_norm=_bn,
                   description=f"VGG config {_cfg}{' with batch norm' if _bn else ''} (torchvision)")(vgg)
