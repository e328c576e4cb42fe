"""ConvNeXt (Liu et al., 2022), module for module as torchvision builds it.

    net = flopcount.models.get("convnext_tiny")
"""

from __future__ import annotations

from functools import partial

import flopcount.runtime as rt
from flopcount.runtime import nn

from ._blocks import Conv2dNormActivation, Permute, StochasticDepth
from ._registry import image_input, register_model

F = nn.functional

__all__ = ["ConvNeXt", "CNBlock", "LayerNorm2d", "convnext"]


class LayerNorm2d(nn.LayerNorm):
    """LayerNorm over the channels of an (N, C, H, W) tensor (normalized in channels-last order)."""

    def forward(self, x):
        x = x.permute(0, 2, 3, 1)
        x = F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)
        return x.permute(0, 3, 1, 2)


class CNBlock(nn.Module):
    """Depthwise 7x7, LayerNorm, 4x MLP with GELU (channels last), layer scale, residual."""

    def __init__(self, dim: int, layer_scale: float, stochastic_depth_prob: float, norm_layer=None):
        super().__init__()
        norm_layer = norm_layer or partial(nn.LayerNorm, eps=1e-6)
        self.block = nn.Sequential(
            nn.Conv2d(dim, dim, kernel_size=7, padding=3, groups=dim, bias=True),
            Permute([0, 2, 3, 1]),
            norm_layer(dim),
            nn.Linear(dim, 4 * dim, bias=True),
            nn.GELU(),
            nn.Linear(4 * dim, dim, bias=True),
            Permute([0, 3, 1, 2]),
        )
        self.layer_scale = nn.Parameter(rt.full((dim, 1, 1), layer_scale))
        self.stochastic_depth = StochasticDepth(stochastic_depth_prob, "row")

    def forward(self, x):
        result = self.layer_scale * self.block(x)
        return self.stochastic_depth(result) + x


class ConvNeXt(nn.Module):
    """ConvNeXt with torchvision's module names (features, avgpool, classifier).

    ``block_setting`` lists (input channels, output channels or None for the last stage, blocks).
    """

    def __init__(self, block_setting, stochastic_depth_prob: float = 0.0, layer_scale: float = 1e-6,
                 num_classes: int = 1000, norm_layer=None):
        super().__init__()
        if not block_setting:
            raise ValueError("ConvNeXt: block_setting must not be empty")
        norm_layer = norm_layer or partial(LayerNorm2d, eps=1e-6)
        # stem: 4x4 "patchify" conv with bias, then LayerNorm2d
        layers = [Conv2dNormActivation(3, block_setting[0][0], kernel_size=4, stride=4, padding=0,
                                       norm_layer=norm_layer, activation_layer=None, bias=True)]
        total_blocks = sum(num_layers for _, _, num_layers in block_setting)
        block_id = 0
        for input_channels, out_channels, num_layers in block_setting:
            stage = []
            for _ in range(num_layers):
                # the drop probability grows linearly from 0 to stochastic_depth_prob
                sd_prob = stochastic_depth_prob * block_id / (total_blocks - 1.0)
                stage.append(CNBlock(input_channels, layer_scale, sd_prob))
                block_id += 1
            layers.append(nn.Sequential(*stage))
            if out_channels is not None:  # downsampling between stages
                layers.append(nn.Sequential(norm_layer(input_channels),
                                            nn.Conv2d(input_channels, out_channels, kernel_size=2, stride=2)))
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        last_in, last_out, _ = block_setting[-1]
        last = last_out if last_out is not None else last_in
        self.classifier = nn.Sequential(norm_layer(last), nn.Flatten(1), nn.Linear(last, num_classes))
        for m in self.modules():
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                nn.init.trunc_normal_(m.weight, std=0.02)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)

    def forward(self, x):
        return self.classifier(self.avgpool(self.features(x)))


# name: stages (input channels, output channels, blocks), stochastic depth, published parameters
_CONFIGS = {
    "convnext_tiny": (((96, 192, 3), (192, 384, 3), (384, 768, 9), (768, None, 3)), 0.1, 28_589_128),
}


def convnext(block_setting, stochastic_depth_prob: float, **kwargs) -> ConvNeXt:
    """A ConvNeXt from its stage table (torchvision's ``convnext_*`` constructors)."""
    return ConvNeXt(block_setting, stochastic_depth_prob=stochastic_depth_prob, **kwargs)


for _name, (_stages, _sd_prob, _params) in _CONFIGS.items():
    register_model(_name, family="convnext", inputs=image_input(), params=_params,
                   description="ConvNeXt (torchvision)",
                   block_setting=_stages, stochastic_depth_prob=_sd_prob)(convnext)
