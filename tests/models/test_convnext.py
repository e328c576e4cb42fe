"""ConvNeXt-Tiny: torchvision's layout, counts, init, LayerNorm2d and stochastic depth."""

import numpy as np
import pytest
from vision_checks import ClassifierTests, assert_constant, assert_normal_std

import flopcount.runtime as rt
from flopcount.models.convnext import LayerNorm2d


class TestConvNeXt(ClassifierTests):
    PUBLISHED_PARAMS = {"convnext_tiny": 28_589_128}
    PUBLISHED_GMACS = {"convnext_tiny": 4.456}

    def test_torchvision_init(self, name, eager):
        model, _ = eager
        block = model.features[5][8]
        for layer in (model.features[0][0], block.block[0], block.block[3], model.classifier[2]):
            assert_normal_std(layer.weight, 0.02)
            assert_constant(layer.bias, 0)
        assert_constant(block.layer_scale, np.float32(1e-6))
        assert_constant(block.block[2].weight, 1)

    def test_stages_and_stochastic_depth(self, name, eager):
        model, _ = eager
        stages = [model.features[i] for i in (1, 3, 5, 7)]
        assert [len(s) for s in stages] == [3, 3, 9, 3]
        probs = [b.stochastic_depth.p for s in stages for b in s]
        assert probs == pytest.approx([0.1 * k / 17 for k in range(18)])
        # downsampling: LayerNorm2d then a 2x2 stride-2 conv
        assert isinstance(model.features[2][0], LayerNorm2d)
        assert model.features[6][1].weight.shape == (768, 384, 2, 2)


def test_layer_norm_2d_normalizes_over_channels():
    norm = LayerNorm2d(4, eps=1e-6)
    with rt.no_grad():
        norm.weight.copy_(rt.tensor([1.0, 2.0, 0.5, -1.0]))
        norm.bias.copy_(rt.tensor([0.0, 0.1, 0.2, 0.3]))
    x = np.random.default_rng(0).standard_normal((2, 4, 3, 5)).astype(np.float32)
    mean = x.mean(axis=1, keepdims=True)
    var = x.var(axis=1, keepdims=True)
    expected = (x - mean) / np.sqrt(var + 1e-6) * np.array([1, 2, 0.5, -1], np.float32)[:, None, None] \
        + np.array([0, 0.1, 0.2, 0.3], np.float32)[:, None, None]
    np.testing.assert_allclose(norm(rt.tensor(x)).numpy(), expected, rtol=1e-5, atol=1e-5)

