"""GoogLeNet: torchvision's layout, counts, init, auxiliary heads and input transform."""

import numpy as np
import pytest
from opcheck import record
from vision_checks import ClassifierTests, assert_constant, assert_normal_std, meta_model, parameter_count

import flopcount.runtime as rt
from flopcount import models
from flopcount.models._blocks import imagenet_to_unit_range
from flopcount.models.googlenet import GoogLeNetOutputs


class TestGoogLeNet(ClassifierTests):
    # torchvision publishes the count without aux1/aux2, so the zoo default has aux_logits=False
    PUBLISHED_PARAMS = {"googlenet": 6_624_904}
    PUBLISHED_GMACS = {"googlenet": 1.498}

    def test_torchvision_init(self, name, eager):
        model, _ = eager
        for layer in (model.conv1.conv, model.inception4e.branch2[1].conv, model.fc):
            assert_normal_std(layer.weight, 0.01)  # truncated at ±2: no effect at this std
        for norm in (model.conv1.bn, model.inception5b.branch4[1].bn):
            assert norm.eps == 0.001
            assert_constant(norm.weight, 1)
            assert_constant(norm.bias, 0)


def test_aux_logits_adds_torchvisions_fresh_default_heads():
    model = meta_model("googlenet", aux_logits=True)
    # torchvision's GoogLeNet() (aux_logits=True) has 13,004,888 parameters
    assert parameter_count(model) == 13_004_888
    assert parameter_count(model.aux1) == parameter_count(model.aux2) - (528 - 512) * 128
    model.train()
    out = model(models.example_input("googlenet", device="meta"))
    assert isinstance(out, GoogLeNetOutputs)
    assert out.logits.shape == out.aux_logits1.shape == out.aux_logits2.shape == (1, 1000)
    assert model.eval()(models.example_input("googlenet", device="meta")).shape == (1, 1000)


def test_without_aux_training_returns_logits():
    model = meta_model("googlenet").train()
    assert model.aux1 is None and model.aux2 is None
    assert model(models.example_input("googlenet", device="meta")).shape == (1, 1000)


def test_imagenet_to_unit_range():
    x = np.random.default_rng(0).standard_normal((2, 3, 4, 5)).astype(np.float32)
    mean, std = np.array([0.485, 0.456, 0.406]), np.array([0.229, 0.224, 0.225])
    pixels = x * std[:, None, None] + mean[:, None, None]   # undo the ImageNet normalization
    expected = (pixels - 0.5) / 0.5
    np.testing.assert_allclose(imagenet_to_unit_range(rt.tensor(x)).numpy(), expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("transform_input", [False, True])
def test_transform_input_runs_first(transform_input):
    # the transform is three scale-and-shifts and a concat ahead of conv1, nothing else
    with rt.meta():
        model = models.get("googlenet", transform_input=transform_input).eval()
    _, events = record(lambda: model(models.example_input("googlenet", device="meta")))
    names = [e.op.name for e in events]
    assert ("cat" in names[:names.index("conv")]) == transform_input
