"""Backward through the PyTorch path (flopcount's own autograd over the converted graph) against
torch's ``FlopCounterMode`` on the GEMM-class ops it counts (mm, addmm, bmm, convolution and
their backward): 2 FLOPs per MAC, forward and backward apart. On the CPU FlopCounterMode has
no formula for the fused attention kernel torch picks there, so attention is compared where
it runs as explicit matmuls, and flopcount's count of the fused one is checked on its own."""

from __future__ import annotations

from collections import Counter

import pytest

torch = pytest.importorskip("torch")
tv_models = pytest.importorskip("torchvision.models")

import flopcount  # noqa: E402

from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

GEMM_CLASS = {"aten.mm", "aten.addmm", "aten.bmm", "aten.baddbmm", "aten.convolution", "aten.convolution_backward"}
ATTENTION = {"scaled_dot_product_attention", "scaled_dot_product_attention_backward"}


def torch_gemm_flops(model, *inputs) -> tuple:
    """(forward, backward) FLOPs FlopCounterMode gives the GEMM-class ops of a training step
    whose loss is the sum of the first output."""
    model.train()
    with FlopCounterMode(display=False) as forward:
        out = model(*inputs)
    out = out[0] if isinstance(out, (tuple, list)) else getattr(out, "last_hidden_state", out)
    with FlopCounterMode(display=False) as backward:
        out.sum().backward()

    def gemm(mode):
        return sum(n for op, n in mode.get_flop_counts()["Global"].items() if str(op) in GEMM_CLASS)

    return gemm(forward), gemm(backward)


def flopcount_macs(report) -> Counter:
    """MACs by (phase, kind): 'gemm' for every op but attention, 'attention' for that."""
    out = Counter()
    for record in report.ops:
        out[(record.phase, "attention" if record.op in ATTENTION else "gemm")] += record.macs
    return out


def _vit():
    return tv_models.VisionTransformer(32, 8, 2, 2, 32, 64, num_classes=10), torch.randn(2, 3, 32, 32)


def _bert_eager():
    transformers = pytest.importorskip("transformers")
    config = transformers.BertConfig(num_hidden_layers=2, hidden_size=32, num_attention_heads=2,
                                     intermediate_size=64, vocab_size=100, hidden_dropout_prob=0.0,
                                     attention_probs_dropout_prob=0.0)
    config._attn_implementation = "eager"   # attention as matmuls (bmm), which FlopCounterMode counts
    return transformers.BertModel(config, add_pooling_layer=False), torch.randint(0, 100, (2, 9))


@pytest.mark.parametrize("build", [lambda: (tv_models.resnet18(), torch.randn(2, 3, 64, 64)), _vit, _bert_eager],
                         ids=["resnet18", "vit", "bert_eager"])
def test_training_step_gemm_flops_equal_flop_counter_mode(build):
    torch.manual_seed(0)
    model, x = build()
    forward, backward = torch_gemm_flops(model, x)
    report = flopcount.profile(model, x, backward=True)
    macs = flopcount_macs(report)
    assert 2 * macs[("forward", "gemm")] == forward
    assert 2 * macs[("backward", "gemm")] == backward
    assert report.root.backward_macs == macs[("backward", "gemm")] + macs[("backward", "attention")]


def test_fused_attention_backward_is_counted_where_flop_counter_mode_has_no_cpu_formula():
    model, x = _vit()
    report = flopcount.profile(model, x, backward=True)
    macs = flopcount_macs(report)
    per_layer = 2 * 2 * 17 * 17 * (16 + 16)          # B·H·L·L·(D + Dv), 17 tokens, 2 heads of 16
    assert macs[("forward", "attention")] == 2 * per_layer
    assert macs[("backward", "attention")] == 2 * 2 * per_layer   # dQ, dK, dV and dP: twice the forward
