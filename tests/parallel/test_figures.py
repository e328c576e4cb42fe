"""Plans against published figures: GPT-3's FLOPs per iteration (Narayanan et al. 2021), ZeRO's
memory per GPU (Rajbhandari et al. 2020), activation memory per layer (Korthikanti et al. 2022,
table 2) and PaLM's model FLOPs utilization (Chowdhery et al. 2022, appendix B)."""

import pytest

import flopcount.runtime as rt
from flopcount import models, parallel

# GPT-3 175B as Narayanan et al. count it: B = 1536, s = 2048, l = 96, h = 12288, V = 51200
B, S, L, H, V = 1536, 2048, 96, 12288, 51200


@pytest.mark.parametrize("recompute, published, formula", [
    ("none", 3.386e18, 72 * B * S * L * H * H * (1 + S / (6 * H) + V / (12 * L * H))),
    ("full", 4.511e18, 96 * B * S * L * H * H * (1 + S / (6 * H) + V / (16 * L * H)))])
def test_gpt3_flops_per_iteration(recompute, published, formula):
    report = parallel.estimate("gpt3_175b", parallel.Plan(global_batch=B, recompute=recompute))
    assert abs(formula / published - 1) < 5e-4  # the appendix's figures are its formula, rounded
    # Every FLOP of the traced step, recomputation included: within 0.5% of the paper. The
    # formula counts the matrix multiplications only; the trace also counts the softmax, layer
    # norms, GELU, bias and residual adds and dropout, which make the whole difference:
    total = report.hardware_flops_per_step
    assert abs(total / published - 1) < 0.005
    matmuls = _matmul_flops(report, recompute)
    assert matmuls == pytest.approx(formula, rel=1e-9)
    elementwise = total - matmuls
    assert 0 < elementwise < 0.002 * total


def _matmul_flops(report, recompute):
    """2 x MACs per step: model FLOPs, plus the forward's MACs again for full recomputation."""
    model = report.model_flops_per_step
    if recompute == "none":
        return model
    # the blocks' forward run again: everything but the LM head's forward (2·B·s·h·V per step)
    head = 2 * B * S * H * V
    return model + (model / 3 - head)


@pytest.mark.parametrize("zero, published_gb", [(0, 120), (1, 31.4), (2, 16.6), (3, 1.9)])
def test_zero_memory_of_a_7_5b_model_on_64_gpus(zero, published_gb):
    with rt.meta():  # 3 x 50000² = 7.5e9 parameters, the paper's Ψ
        net = rt.nn.Sequential(*[rt.nn.Linear(50_000, 50_000, bias=False) for _ in range(3)])
    report = parallel.estimate(net, parallel.Plan(dp=64, zero=zero), input_shape=(50_000,))
    (stage,) = report.stages
    assert stage.params == 7_500_000_000
    states = stage.weights + stage.gradients + stage.optimizer
    assert round(states / 1e9, 1) == published_gb


KORTHIKANTI = {  # activation bytes per layer / (s·b·h), table 2, with a = 96 heads
    ("none", 1, False): 34 + 5 * 96 * S / H,
    ("none", 8, False): 10 + 24 / 8 + 5 * 96 * S / (H * 8),
    ("none", 8, True): 34 / 8 + 5 * 96 * S / (H * 8),
    ("selective", 8, False): 10 + 24 / 8,
    ("selective", 8, True): 34 / 8,
    ("full", 1, False): 2,
}


@pytest.mark.parametrize("recompute, t, sp", sorted(KORTHIKANTI))
def test_activation_memory_per_layer(recompute, t, sp):
    """GPT-3's layer (eager attention, dropout, 16-bit) at micro-batch 1. The saved tensors are
    the paper's: q and k reshaped into heads after being sliced out of the fused QKV projection
    are views, as numpy makes them (the liveness model reads reshape's own view rule)."""
    with rt.meta():
        net = models.get("gpt3_175b", n_layer=4)
    plan = parallel.Plan(tp=t, sequence_parallel=sp, recompute=recompute)
    report = parallel.estimate(net, plan, input_shape=(S,), input_dtype="int64")
    per_layer = report.stages[0].per_block[1] / (S * H)  # a layer in the middle; b = 1
    paper = KORTHIKANTI[(recompute, t, sp)]
    assert abs(per_layer - paper) / paper < 0.05, (per_layer, paper)


def test_palm_540b_model_flops_per_token_and_mfu():
    """PaLM 540B (118 layers, d = 18432, 48 heads of 256 sharing one key/value head, SwiGLU
    MLP of 73728, vocabulary 256000 tied to the output): 6N + 12·L·H·Q·T model FLOPs per token,
    and 46.2% MFU at 238.3k tokens/s on 6144 TPU v4 chips of 275 TFLOP/s."""
    layers, heads, head_dim, seq = 118, 48, 256, 2048
    with rt.meta():
        net = models.get("llama", hidden_size=18432, intermediate_size=73728, num_hidden_layers=layers,
                         num_attention_heads=heads, num_key_value_heads=1, head_dim=head_dim,
                         vocab_size=256_000, tie_word_embeddings=True)
    n = sum(p.numel() for p in net.parameters())
    assert abs(n / 1e9 - 540.35) < 0.01  # the paper's 540.35B; the RMS norms' scales add 4.4M
    report = parallel.estimate(net, parallel.Plan(), input_shape=(seq,), input_dtype="int64")
    per_token = report.model_flops_per_step / report.tokens_per_step
    palm = 6 * n + 12 * layers * heads * head_dim * seq
    # the trace counts matrix multiplications: N without the norms' scales (a few million)
    assert per_token == pytest.approx(palm, rel=1e-5)
    assert round(parallel.mfu(per_token, 238.3e3, 6144, 275e12), 3) == 0.462
