"""GoogLeNet (Inception v1) as torchvision builds it.

Which parameter count is "GoogLeNet's": torchvision's class defaults to ``aux_logits=True`` (the
two auxiliary classifiers aux1/aux2, 13,004,888 parameters for a fresh model), but its published
figure, 6,624,904, is the model without them, as the pretrained weights ship. The zoo entry
``googlenet`` matches the published figure, so it is registered with ``aux_logits=False``;
``models.get("googlenet", aux_logits=True)`` gives torchvision's fresh default.
"""

from __future__ import annotations

from collections import namedtuple

from ..runtime import cat, flatten, nn
from ..runtime.nn import functional as F
from ._blocks import BasicConv2d, imagenet_to_unit_range, trunc_normal_init_
from ._registry import image_input, register_model

__all__ = ["GoogLeNet", "GoogLeNetOutputs", "googlenet"]

GoogLeNetOutputs = namedtuple("GoogLeNetOutputs", ["logits", "aux_logits2", "aux_logits1"])


class Inception(nn.Module):
    """Four parallel branches (1x1; 1x1-3x3; 1x1-3x3; 3x3 max pool-1x1) concatenated.

    The third branch is 3x3 where the paper says 5x5: torchvision keeps that known quirk of the
    ported weights, and so does this copy.
    """

    def __init__(self, in_channels: int, ch1x1: int, ch3x3red: int, ch3x3: int, ch5x5red: int, ch5x5: int,
                 pool_proj: int) -> None:
        super().__init__()
        self.branch1 = BasicConv2d(in_channels, ch1x1, kernel_size=1)
        self.branch2 = nn.Sequential(BasicConv2d(in_channels, ch3x3red, kernel_size=1),
                                     BasicConv2d(ch3x3red, ch3x3, kernel_size=3, padding=1))
        self.branch3 = nn.Sequential(BasicConv2d(in_channels, ch5x5red, kernel_size=1),
                                     BasicConv2d(ch5x5red, ch5x5, kernel_size=3, padding=1))
        self.branch4 = nn.Sequential(nn.MaxPool2d(kernel_size=3, stride=1, padding=1, ceil_mode=True),
                                     BasicConv2d(in_channels, pool_proj, kernel_size=1))

    def forward(self, x):
        return cat([self.branch1(x), self.branch2(x), self.branch3(x), self.branch4(x)], 1)


class InceptionAux(nn.Module):
    """Auxiliary classifier: 4x4 adaptive pool, 1x1 conv, two linear layers (training only)."""

    def __init__(self, in_channels: int, num_classes: int, dropout: float = 0.7) -> None:
        super().__init__()
        self.conv = BasicConv2d(in_channels, 128, kernel_size=1)
        self.fc1 = nn.Linear(2048, 1024)
        self.fc2 = nn.Linear(1024, num_classes)
        self.dropout = nn.Dropout(p=dropout)

    def forward(self, x):
        x = self.conv(F.adaptive_avg_pool2d(x, (4, 4)))
        x = F.relu(self.fc1(flatten(x, 1)), inplace=True)
        return self.fc2(self.dropout(x))


class GoogLeNet(nn.Module):
    """torchvision's GoogLeNet. In training mode with ``aux_logits`` the forward returns
    :data:`GoogLeNetOutputs`; otherwise the logits.

    >>> import flopcount.runtime as rt
    >>> with rt.meta():
    ...     GoogLeNet(aux_logits=False).eval()(rt.empty(1, 3, 224, 224)).shape
    (1, 1000)
    """

    def __init__(self, num_classes: int = 1000, aux_logits: bool = True, transform_input: bool = False,
                 init_weights: bool | None = None, dropout: float = 0.2, dropout_aux: float = 0.7) -> None:
        super().__init__()
        self.aux_logits = aux_logits
        self.transform_input = transform_input
        self.conv1 = BasicConv2d(3, 64, kernel_size=7, stride=2, padding=3)
        self.maxpool1 = nn.MaxPool2d(3, stride=2, ceil_mode=True)
        self.conv2 = BasicConv2d(64, 64, kernel_size=1)
        self.conv3 = BasicConv2d(64, 192, kernel_size=3, padding=1)
        self.maxpool2 = nn.MaxPool2d(3, stride=2, ceil_mode=True)
        self.inception3a = Inception(192, 64, 96, 128, 16, 32, 32)
        self.inception3b = Inception(256, 128, 128, 192, 32, 96, 64)
        self.maxpool3 = nn.MaxPool2d(3, stride=2, ceil_mode=True)
        self.inception4a = Inception(480, 192, 96, 208, 16, 48, 64)
        self.inception4b = Inception(512, 160, 112, 224, 24, 64, 64)
        self.inception4c = Inception(512, 128, 128, 256, 24, 64, 64)
        self.inception4d = Inception(512, 112, 144, 288, 32, 64, 64)
        self.inception4e = Inception(528, 256, 160, 320, 32, 128, 128)
        self.maxpool4 = nn.MaxPool2d(2, stride=2, ceil_mode=True)
        self.inception5a = Inception(832, 256, 160, 320, 32, 128, 128)
        self.inception5b = Inception(832, 384, 192, 384, 48, 128, 128)
        self.aux1 = InceptionAux(512, num_classes, dropout=dropout_aux) if aux_logits else None
        self.aux2 = InceptionAux(528, num_classes, dropout=dropout_aux) if aux_logits else None
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.dropout = nn.Dropout(p=dropout)
        self.fc = nn.Linear(1024, num_classes)
        # torchvision warns that its default will change and then initializes (None -> True)
        if init_weights is None or init_weights:
            trunc_normal_init_(self, std=0.01)

    def forward(self, x):
        if self.transform_input:
            x = imagenet_to_unit_range(x)
        x = self.maxpool1(self.conv1(x))
        x = self.maxpool2(self.conv3(self.conv2(x)))
        x = self.maxpool3(self.inception3b(self.inception3a(x)))
        x = self.inception4a(x)
        # as torchvision: the auxiliary heads run whenever they exist and the model trains
        aux1 = self.aux1(x) if self.aux1 is not None and self.training else None
        x = self.inception4d(self.inception4c(self.inception4b(x)))
        aux2 = self.aux2(x) if self.aux2 is not None and self.training else None
        x = self.maxpool4(self.inception4e(x))
        x = self.inception5b(self.inception5a(x))
        x = self.fc(self.dropout(flatten(self.avgpool(x), 1)))
        return GoogLeNetOutputs(x, aux2, aux1) if self.training and self.aux_logits else x


@register_model("googlenet", family="googlenet", inputs=image_input(), params=6_624_904, aux_logits=False,
                description="GoogLeNet (torchvision), without the auxiliary classifiers")
def googlenet(**kwargs) -> GoogLeNet:
    """GoogLeNet; keyword arguments go to :class:`GoogLeNet` (see the module docstring on aux_logits)."""
    return GoogLeNet(**kwargs)
