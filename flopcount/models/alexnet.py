"""AlexNet as torchvision builds it (the "one weird trick" variant, 61.1M parameters)."""

from __future__ import annotations

from ..runtime import flatten, nn
from ._registry import image_input, register_model

__all__ = ["AlexNet", "alexnet"]


class AlexNet(nn.Module):
    """torchvision's AlexNet: five convolutions, then three fully connected layers.

    Layers keep PyTorch's default initialization, as torchvision's does.

    >>> import flopcount.runtime as rt
    >>> with rt.meta():
    ...     net = AlexNet()
    ...     net(rt.empty(1, 3, 224, 224)).shape
    (1, 1000)
    """

    def __init__(self, num_classes: int = 1000, dropout: float = 0.5) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 64, kernel_size=11, stride=4, padding=2),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2),
            nn.Conv2d(64, 192, kernel_size=5, padding=2),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2),
            nn.Conv2d(192, 384, kernel_size=3, padding=1),
            nn.ReLU(inplace=True),
            nn.Conv2d(384, 256, kernel_size=3, padding=1),
            nn.ReLU(inplace=True),
            nn.Conv2d(256, 256, kernel_size=3, padding=1),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2),
        )
        self.avgpool = nn.AdaptiveAvgPool2d((6, 6))
        self.classifier = nn.Sequential(
            nn.Dropout(p=dropout),
            nn.Linear(256 * 6 * 6, 4096),
            nn.ReLU(inplace=True),
            nn.Dropout(p=dropout),
            nn.Linear(4096, 4096),
            nn.ReLU(inplace=True),
            nn.Linear(4096, num_classes),
        )

    def forward(self, x):
        x = self.avgpool(self.features(x))
        return self.classifier(flatten(x, 1))


@register_model("alexnet", family="alexnet", inputs=image_input(), params=61_100_840,
                description="AlexNet (torchvision), 224x224")
def alexnet(**kwargs) -> AlexNet:
    """AlexNet; keyword arguments go to :class:`AlexNet`."""
    return AlexNet(**kwargs)
