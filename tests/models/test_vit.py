"""ViT-B/16: torchvision's layout, counts, init, and attention seen by the counters."""

import math

import pytest
from vision_checks import (ClassifierTests, assert_constant, assert_normal_std, assert_uniform_bound,
                           conv_linear_macs, meta_forward, meta_model)

import flopcount.runtime as rt
from flopcount import models

ATTENTION_OPS = ("scaled_dot_product_attention", "matmul")


def attention_macs(events) -> int:
    return sum(e.cost.macs for e in events if e.op.name in ATTENTION_OPS)


class TestViT(ClassifierTests):
    PUBLISHED_PARAMS = {"vit_b_16": 86_567_656}
    # torchvision's figure counts the two attention contractions besides conv and linear
    PUBLISHED_GMACS = {"vit_b_16": 17.564}

    def test_meta_forward_shape_and_macs(self, name):
        out, events = meta_forward(meta_model(name), name)
        assert out.shape == (1, 1000) and out.dtype == rt.float32
        total = conv_linear_macs(events) + attention_macs(events)
        assert abs(total / 1e9 - self.PUBLISHED_GMACS[name]) < 5e-4

    def test_torchvision_init(self, name, eager):
        model, _ = eager
        assert_normal_std(model.conv_proj.weight, math.sqrt(1 / (3 * 16 * 16)))
        assert_constant(model.conv_proj.bias, 0)
        assert_constant(model.class_token, 0)
        assert_normal_std(model.encoder.pos_embedding, 0.02)
        assert_constant(model.heads.head.weight, 0)
        assert_constant(model.heads.head.bias, 0)
        layer = model.encoder.layers.encoder_layer_11
        assert_uniform_bound(layer.mlp[0].weight, math.sqrt(6 / (768 + 3072)))
        assert_normal_std(layer.mlp[3].bias, 1e-6, rel=0.1)
        # nn.MultiheadAttention keeps its own init: Xavier on the packed projection, zero biases
        assert_uniform_bound(layer.self_attention.in_proj_weight, math.sqrt(6 / (768 + 3 * 768)))
        assert_constant(layer.self_attention.in_proj_bias, 0)
        assert_constant(layer.self_attention.out_proj.bias, 0)


def test_attention_contractions_are_counted():
    _, events = meta_forward(meta_model("vit_b_16"), "vit_b_16")
    attention = [e for e in events if e.op.name in ATTENTION_OPS]
    # one per encoder layer, inside its self_attention module
    assert len(attention) == 12
    assert all(isinstance(e.module, rt.nn.MultiheadAttention) for e in attention)
    # 12 layers x 12 heads x (QK^T + PV) over 197 tokens of head size 64
    assert attention_macs(events) == 12 * 12 * 197 * 197 * (64 + 64)


def test_module_paths_follow_torchvision():
    names = dict(meta_model("vit_b_16").named_parameters())
    assert names["encoder.layers.encoder_layer_0.self_attention.in_proj_weight"].shape == (2304, 768)
    assert names["encoder.layers.encoder_layer_0.self_attention.out_proj.weight"].shape == (768, 768)
    assert names["encoder.layers.encoder_layer_11.mlp.3.weight"].shape == (768, 3072)
    assert names["encoder.pos_embedding"].shape == (1, 197, 768)


def test_wrong_image_size_is_refused():
    model = meta_model("vit_b_16")
    with pytest.raises(rt.ShapeError, match="224x224"):
        model(rt.empty(1, 3, 192, 192, device="meta"))


def test_patch_size_must_divide_the_image():
    with pytest.raises(rt.ShapeError, match="patch_size"):
        with rt.meta():
            models.get("vit_b_16", image_size=200)
