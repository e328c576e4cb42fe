"""Llama-2-7B's published figures and Chinchilla's forward FLOPs, from the trace.

* 6,738,415,616 parameters; the KV cache in half precision is 524,288 bytes per token (32 layers ·
  keys and values · 32 heads · 128 · 2 bytes), exactly 1 GiB at 2,048 tokens; the weights are
  13.48 GB in 16-bit.
* A decode step at batch 1 reads every weight once, except the embedding table, which is
  gathered: one row per token.
* Hoffmann et al. 2022 (Chinchilla), appendix F, counts a forward pass per component; where the
  two conventions count the same thing the trace gives exactly their number, and where they
  differ the difference is the formula below.
"""

import pytest

import flopcount.runtime as rt
from flopcount import llm, models

HALF = getattr(rt, "bfloat16", rt.float16)  # 16-bit either way; bfloat16 once the runtime has it
CONFIG = models.info("llama2_7b").config
L, D, H, FF, V = (CONFIG[k] for k in ("num_hidden_layers", "hidden_size", "num_attention_heads",
                                      "intermediate_size", "vocab_size"))
DK = D // H


@pytest.fixture(scope="module")
def decode():
    return llm.profile("llama2_7b", llm.Decode(context=2048), dtype=HALF)


def test_parameters_weights_and_kv_cache(decode):
    assert decode.params == 6_738_415_616
    assert decode.weight_bytes == 2 * 6_738_415_616
    assert round(decode.weight_bytes / 1e9, 2) == 13.48
    assert decode.kv_bytes_per_token == 524_288 == L * 2 * H * DK * 2
    with rt.meta():
        model = models.get("llama2_7b")
    assert llm.kv_cache_bytes(model, 2048, 1, HALF) == 2 ** 30
    # the step returns the cache with the new token: 2,049 positions
    assert decode.decode.last.kv_cache_bytes == 2049 * 524_288


def test_a_decode_step_reads_every_weight_once(decode):
    step = decode.decode.last
    table = V * D * 2
    assert step.total.weight_read == decode.weight_bytes - table + D * 2  # the table: one row
    for op in step.ops:
        if op.op == "linear":  # every projection reads its whole weight
            assert op.weight_read > 0
    # the cache is read once by QKᵀ and PV (2,049 keys and values) and one position written
    assert step.total.kv_read == 2049 * 524_288
    assert step.total.kv_written == 524_288


def _component_flops(step, n: int) -> dict:
    """FLOPs by Chinchilla's components, and the parts it does not have, from the traced ops."""
    out = {}

    def add(key, flops):
        out[key] = out.get(key, 0) + flops

    for op in step.ops:
        leaf = op.scope.rpartition(".")[2]
        if op.op == "embedding":
            add("embeddings", op.flops)
        elif op.op == "linear" and leaf in ("q_proj", "k_proj", "v_proj"):
            add("qkv", op.flops)
        elif op.op == "linear" and leaf == "o_proj":
            add("final linear", op.flops)
        elif op.op == "linear" and leaf in ("up_proj", "down_proj"):
            add("dense", op.flops)
        elif op.op == "linear" and leaf == "gate_proj":
            add("gate", op.flops)
        elif op.op == "linear" and leaf == "lm_head":
            add("output logits", op.flops)
        elif op.op == "matmul":
            add("attention matmuls", op.flops)
        elif leaf == "self_attn" and op.shape[-2:] == (n, n):  # on the scores: scale, mask, softmax
            add("softmax, scale and mask", op.flops)
        elif leaf == "mlp" and op.op == "mul" or leaf == "act_fn":
            add("gate activation and product", op.flops)
        else:
            add("not in chinchilla", op.flops)
    return out


def test_chinchilla_forward_flops_per_component():
    n = 2048
    step = llm.profile("llama2_7b", llm.Prefill(n), dtype=HALF).prefill
    ours = _component_flops(step, n)
    chinchilla = {
        "embeddings": 2 * n * V * D,
        "qkv": L * 2 * 3 * n * D * (DK * H),
        "logits": L * 2 * n * n * (DK * H),
        "softmax": L * 3 * H * n * n,
        "softmax @ values": L * 2 * n * n * (DK * H),
        "final linear": L * 2 * n * (DK * H) * D,
        "dense": L * 2 * n * (D * FF + D * FF),
        "output logits": 2 * n * D * V,
    }
    # counted the same way: equal
    for key in ("qkv", "final linear", "dense", "output logits"):
        assert ours[key] == chinchilla[key], key
    assert ours["attention matmuls"] == chinchilla["logits"] + chinchilla["softmax @ values"]
    # counted differently: an embedding is a gather (no arithmetic), not a one-hot matmul
    assert ours["embeddings"] == 0 and chinchilla["embeddings"] == 2 * n * V * D
    # softmax: 5 per score (max, subtract, exp, sum, divide) against Chinchilla's 3, plus the
    # scale and the causal mask (1 each) that eager attention applies to every score
    assert ours["softmax, scale and mask"] == L * (5 + 1 + 1) * H * n * n
    assert ours["softmax, scale and mask"] - chinchilla["softmax"] == L * 4 * H * n * n
    # Chinchilla's FFN has two matrices; Llama's SwiGLU a third (the gate), SiLU (5 per element)
    # and the product (1)
    assert ours["gate"] == L * 2 * n * D * FF
    assert ours["gate activation and product"] == L * (5 + 1) * n * FF
    # and Chinchilla leaves out the RMSNorms (5 per element + the weight's multiply), the
    # residual adds, the rotation of q and k (q·cos + rotate_half(q)·sin: 3.5 per element) and
    # the rotary angles (position · frequency, cos, sin)
    norms = (2 * L + 1) * 6 * n * D
    residuals = 2 * L * n * D
    rotation = L * 2 * 3.5 * n * D
    angles = 2.5 * n * DK
    assert ours["not in chinchilla"] == norms + residuals + rotation + angles
    assert sum(ours.values()) == step.total.flops
