"""Inception v3: torchvision's layout, counts, init and auxiliary head."""

from vision_checks import ClassifierTests, assert_constant, assert_normal_std, meta_model, parameter_count

from flopcount import models
from flopcount.models.inception import InceptionOutputs


class TestInceptionV3(ClassifierTests):
    PUBLISHED_PARAMS = {"inception_v3": 27_161_264}  # with AuxLogits, as torchvision publishes
    PUBLISHED_GMACS = {"inception_v3": 5.713}
    INPUT_SIZE = 299

    def test_torchvision_init(self, name, eager):
        model, _ = eager
        # truncated normal, std 0.1 unless the Conv2d/Linear itself carries a ``stddev``
        for layer in (model.Conv2d_4a_3x3.conv, model.Mixed_7c.branch3x3dbl_3b.conv, model.fc,
                      model.AuxLogits.conv1.conv):  # torchvision's conv1.stddev sits on the wrapper
            assert_normal_std(layer.weight, 0.1)
        assert_normal_std(model.AuxLogits.fc.weight, 0.001)
        for norm in (model.Conv2d_1a_3x3.bn, model.Mixed_6e.branch_pool.bn):
            assert norm.eps == 0.001
            assert_constant(norm.weight, 1)
            assert_constant(norm.bias, 0)


def test_training_returns_aux_logits():
    # batch 2: in training, batch norm needs more than one value per channel (the 1x1 aux maps)
    model = meta_model("inception_v3").train()
    out = model(models.example_input("inception_v3", batch=2, device="meta"))
    assert isinstance(out, InceptionOutputs)
    assert out.logits.shape == out.aux_logits.shape == (2, 1000)


def test_without_aux_logits():
    model = meta_model("inception_v3", aux_logits=False)
    assert model.AuxLogits is None
    aux = meta_model("inception_v3").AuxLogits
    assert parameter_count(model) == 27_161_264 - parameter_count(aux)
    assert model.train()(models.example_input("inception_v3", batch=2, device="meta")).shape == (2, 1000)
