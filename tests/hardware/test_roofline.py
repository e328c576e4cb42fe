"""The roofline against hand-derived numbers: a GEMM and a GEMV from their formulas, and the
ops of a Llama-like layer traced on the meta device (prefill and decode shapes), checked
against the figures LLM-inference analyses publish for H100 SXM."""

import pytest

import flopcount.runtime as rt
from flopcount import hardware
from flopcount.hardware import compute_dtype, roofline
from opcheck import record

H100 = hardware.get("h100-sxm")


def _cost(fn):
    """The cost of the one op of ``fn`` that computes (a transpose before it is a free view)."""
    _, events = record(fn)
    computing = [e for e in events if e.op.computes]
    assert len(computing) == 1, [e.op.name for e in events]
    return computing[0].cost


def test_a_square_gemm_is_compute_bound_at_its_formula():
    n = 8192
    cost = rt.Cost(macs=n ** 3, flops=2 * n ** 3, bytes_read=2 * 2 * n * n, bytes_written=2 * n * n)
    r = roofline(cost, H100, "bfloat16")
    assert r.bound == "compute"
    assert r.time_s == pytest.approx(2 * n ** 3 / 989.5e12)
    assert r.memory_s == pytest.approx(6 * n * n / 3.35e12)
    assert r.intensity == pytest.approx(2 * n ** 3 / (6 * n * n))
    assert r.ridge == pytest.approx(989.5e12 / 3.35e12)


def test_flops_that_are_not_macs_run_at_the_vector_rate():
    cost = rt.Cost(macs=0, flops=10 ** 12, bytes_read=0, bytes_written=0)
    assert roofline(cost, H100, "bfloat16").compute_s == pytest.approx(1e12 / 67e12)
    mixed = rt.Cost(macs=10 ** 12, flops=2 * 10 ** 12 + 10 ** 9)
    assert roofline(mixed, H100, "float16").compute_s == pytest.approx(2e12 / 989.5e12 + 1e9 / 67e12)


def test_weight_gemms_are_memory_bound_in_decode_and_compute_bound_in_prefill():
    d = 4096  # Llama-2-7B's hidden size; q_proj's weight is d x d in bfloat16
    with rt.meta():
        w = rt.empty(d, d, dtype=rt.bfloat16)
        for tokens, bound in ((1, "memory"), (8, "memory"), (2048, "compute")):
            x = rt.empty(1, tokens, d, dtype=rt.bfloat16)
            r = roofline(_cost(lambda: rt.nn.functional.linear(x, w)), H100, "bfloat16")
            assert r.bound == bound, tokens
    # decode at batch 1 reads the weight once: its time is the weight over the bandwidth, within 1%
    with rt.meta():
        x = rt.empty(1, 1, d, dtype=rt.bfloat16)
        decode = roofline(_cost(lambda: rt.nn.functional.linear(x, w)), H100, "bfloat16")
    assert decode.time_s == pytest.approx(2 * d * d / 3.35e12, rel=0.01)


def test_unfused_attention_scores_stay_memory_bound_in_prefill():
    # q @ kᵀ per head at 2048 tokens and head size 128: 2·L²·D FLOPs; q and k read
    # (2·L·D elements), the L x L scores written, two bytes each: about 114 FLOP per byte,
    # under H100's ridge of about 295
    heads, length, dim = 32, 2048, 128
    with rt.meta():
        q = rt.empty(1, heads, length, dim, dtype=rt.bfloat16)
        k_t = rt.empty(1, heads, length, dim, dtype=rt.bfloat16).transpose(-1, -2)
        r = roofline(_cost(lambda: q @ k_t), H100, "bfloat16")
    expected = 2 * length * length * dim / (2 * (2 * length * dim + length * length))
    assert r.intensity == pytest.approx(expected) and round(r.intensity) == 114
    assert r.bound == "memory"


def test_compute_dtype_of_mixed_inputs():
    assert compute_dtype([rt.bfloat16, rt.int4]) is rt.bfloat16      # weight-only int4
    assert compute_dtype([rt.int8, rt.int8]) is rt.int8              # an int8 GEMM
    assert compute_dtype([rt.int64, rt.float16, rt.float32]) is rt.float32
    assert compute_dtype([]) is rt.float32


def test_the_cpu_profile_prices_a_cost():
    cpu = hardware.get("cpu")
    r = roofline(rt.Cost(macs=10 ** 6, flops=2 * 10 ** 6, bytes_read=4 * 10 ** 6), cpu, "float32")
    assert r.time_s == max(r.compute_s, r.memory_s) > 0
