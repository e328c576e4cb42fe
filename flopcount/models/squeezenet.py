"""SqueezeNet 1.0 and 1.1 as torchvision builds them: Fire modules, layer lists as data."""

from __future__ import annotations

from ..runtime import cat, flatten, nn
from ..runtime.nn import init
from ._registry import image_input, register_model

__all__ = ["Fire", "SqueezeNet", "squeezenet"]

# version: (stem conv channels, stem kernel), then the body: "M" a 3x3/2 max pool (ceil mode),
# a tuple a Fire(inplanes, squeeze, expand1x1, expand3x3)
_STEMS = {"1_0": (96, 7), "1_1": (64, 3)}
_BODIES = {
    "1_0": ["M", (96, 16, 64, 64), (128, 16, 64, 64), (128, 32, 128, 128), "M",
            (256, 32, 128, 128), (256, 48, 192, 192), (384, 48, 192, 192), (384, 64, 256, 256), "M",
            (512, 64, 256, 256)],
    "1_1": ["M", (64, 16, 64, 64), (128, 16, 64, 64), "M", (128, 32, 128, 128), (256, 32, 128, 128), "M",
            (256, 48, 192, 192), (384, 48, 192, 192), (384, 64, 256, 256), (512, 64, 256, 256)],
}


class Fire(nn.Module):
    """A 1x1 squeeze conv, then 1x1 and 3x3 expand convs whose outputs are concatenated."""

    def __init__(self, inplanes: int, squeeze_planes: int, expand1x1_planes: int,
                 expand3x3_planes: int) -> None:
        super().__init__()
        self.inplanes = inplanes
        self.squeeze = nn.Conv2d(inplanes, squeeze_planes, kernel_size=1)
        self.squeeze_activation = nn.ReLU(inplace=True)
        self.expand1x1 = nn.Conv2d(squeeze_planes, expand1x1_planes, kernel_size=1)
        self.expand1x1_activation = nn.ReLU(inplace=True)
        self.expand3x3 = nn.Conv2d(squeeze_planes, expand3x3_planes, kernel_size=3, padding=1)
        self.expand3x3_activation = nn.ReLU(inplace=True)

    def forward(self, x):
        x = self.squeeze_activation(self.squeeze(x))
        return cat([self.expand1x1_activation(self.expand1x1(x)),
                    self.expand3x3_activation(self.expand3x3(x))], 1)


class SqueezeNet(nn.Module):
    """torchvision's SqueezeNet; ``version`` is "1_0" or "1_1".

    >>> import flopcount.runtime as rt
    >>> with rt.meta():
    ...     SqueezeNet("1_1")(rt.empty(1, 3, 224, 224)).shape
    (1, 1000)
    """

    def __init__(self, version: str = "1_0", num_classes: int = 1000, dropout: float = 0.5) -> None:
        super().__init__()
        if version not in _STEMS:
            raise ValueError(f"Unsupported SqueezeNet version {version}: 1_0 or 1_1 expected")
        self.num_classes = num_classes
        stem_channels, stem_kernel = _STEMS[version]
        layers = [nn.Conv2d(3, stem_channels, kernel_size=stem_kernel, stride=2), nn.ReLU(inplace=True)]
        for item in _BODIES[version]:
            layers.append(nn.MaxPool2d(kernel_size=3, stride=2, ceil_mode=True) if item == "M" else Fire(*item))
        self.features = nn.Sequential(*layers)
        final_conv = nn.Conv2d(512, num_classes, kernel_size=1)
        self.classifier = nn.Sequential(nn.Dropout(p=dropout), final_conv, nn.ReLU(inplace=True),
                                        nn.AdaptiveAvgPool2d((1, 1)))
        # torchvision: the classifier conv gets N(0, 0.01), every other conv He uniform; biases 0
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                if m is final_conv:
                    init.normal_(m.weight, mean=0.0, std=0.01)
                else:
                    init.kaiming_uniform_(m.weight)
                if m.bias is not None:
                    init.constant_(m.bias, 0)

    def forward(self, x):
        return flatten(self.classifier(self.features(x)), 1)


def squeezenet(version: str = "1_0", **kwargs) -> SqueezeNet:
    """A SqueezeNet of ``version`` "1_0" or "1_1"; other arguments go to :class:`SqueezeNet`."""
    return SqueezeNet(version, **kwargs)


# torchvision's published parameter counts
for _version, _params in (("1_0", 1_248_424), ("1_1", 1_235_496)):
    register_model(f"squeezenet{_version}", family="squeezenet", inputs=image_input(), params=_params,
                   version=_version, description=f"SqueezeNet {_version.replace('_', '.')} (torchvision)")(squeezenet)
