"""The roofline on an H100 SXM: a decode step at batch 1 takes the time of reading the weights and
the KV cache at 3.35 TB/s, every GEMM memory-bound; a 2,048-token prefill is compute-bound in
every weight GEMM while the unfused attention score matmuls stay memory-bound (about 114 FLOP
per byte at head size 128, under the ridge of about 295)."""

import pytest

import flopcount.runtime as rt
from flopcount import hardware, llm
from flopcount.hardware import COMPUTE, MEMORY
from flopcount.llm.roofline_times import sum_of_max

HALF = getattr(rt, "bfloat16", rt.float16)
# NVIDIA H100 SXM5 datasheet: 989.4 TFLOP/s dense BF16/FP16 tensor (1,979 with sparsity),
# 67 TFLOP/s FP32 (also the vector units' rate), 3.35 TB/s HBM3, 80 GB; given by hand (the
# node's links do not enter a single device's roofline)
H100 = hardware.Profile("h100-sxm", "H100 SXM5 by hand",
                        peak_flops={"bfloat16": 989.4e12, "float16": 989.4e12, "float32": 67e12}, vector_flops=67e12,
                        memory_bandwidth=3.35e12, memory_bytes=80 * 10 ** 9,
                        intra_node_bandwidth=0.0, inter_node_bandwidth=0.0, devices_per_node=1,
                        intra_node_link="-", node="-")


@pytest.fixture(scope="module")
def decode():
    return llm.profile("llama2_7b", llm.Decode(context=2048), dtype=HALF, hardware=H100)


@pytest.fixture(scope="module")
def prefill():
    return llm.profile("llama2_7b", llm.Prefill(2048), dtype=HALF, hardware=H100)


def _gemms(step, times):
    return [(op, t) for op, t in zip(step.ops, times.ops) if op.op in ("linear", "matmul")]


def test_decode_at_batch_1_is_the_weights_and_cache_read_at_full_bandwidth(decode):
    step, times = decode.decode.last, decode.roofline.last_decode
    streamed = (step.total.weight_read + step.total.kv_read) / H100.memory_bandwidth
    assert times.seconds == pytest.approx(streamed, rel=0.01)
    assert decode.roofline.time_per_output_token == times.seconds
    assert decode.roofline.tokens_per_second == pytest.approx(1 / times.seconds)
    assert all(bound == MEMORY for _, (_, bound) in _gemms(step, times))


def test_prefill_weight_gemms_are_compute_bound_and_score_matmuls_memory_bound(prefill):
    step, times = prefill.prefill, prefill.roofline.prefill
    assert H100.ridge(HALF) == pytest.approx(295, abs=1) == prefill.roofline.ridge
    gemms = _gemms(step, times)
    weights = [(op, t) for op, t in gemms if op.weight_read]
    scores = [(op, t) for op, t in gemms if op.kv_read]
    assert len(weights) == 32 * 7 + 1 and len(scores) == 32 * 2
    assert all(bound == COMPUTE for _, (_, bound) in weights)
    n, d = 2048, 128  # QKᵀ: 2·n²·d FLOPs over q, k (n·d each) and the scores (n²), 2 bytes each
    expected = 2 * n * n * d / (2 * (2 * n * d + n * n))
    for op, (_, bound) in scores:
        assert bound == MEMORY and op.intensity == pytest.approx(expected) and 113 < op.intensity < 115
    assert prefill.roofline.time_to_first_token == times.seconds


def test_fits_in_memory_counts_weights_and_the_final_cache(decode):
    assert decode.roofline.needed_bytes == decode.weight_bytes + decode.kv_cache_bytes
    assert decode.roofline.fits
    big = llm.profile("llama2_7b", llm.Decode(context=4096), batch=64, dtype=HALF, hardware=H100)
    assert big.kv_cache_bytes == 64 * 4097 * 524_288 and not big.roofline.fits


def test_generation_time_sums_every_step_exactly():
    # 9 new tokens: the prefill gives the first, 8 decode steps the rest
    report = llm.profile("llama", llm.Generate(prompt=6, new_tokens=9), hardware=H100)
    stepwise = sum(llm.profile("llama", llm.Decode(c), hardware=H100).roofline.decode_seconds
                   for c in range(6, 14))
    assert report.roofline.decode_seconds == pytest.approx(stepwise, rel=1e-12)
    assert report.roofline.time_per_output_token == pytest.approx(stepwise / 8, rel=1e-12)


@pytest.mark.parametrize("a,b", [((0.0, 1.0), (5.0, 0.0)), ((5.0, 0.0), (0.0, 1.0)), ((1.0, 2.0), (1.0, 2.0)),
                                 ((3.0, -1.0), (0.0, 0.5)), ((0.5, 0.25), (9.0, 0.0))])
def test_sum_of_max_of_two_lines(a, b):
    steps = 12
    brute = sum(max(a[0] + a[1] * i, b[0] + b[1] * i) for i in range(steps))
    assert sum_of_max(a, b, steps) == pytest.approx(brute)


def test_a_hardware_profile_name_gives_the_datasheet_device(decode):
    """``hardware="h100-sxm"`` reads flopcount.hardware's catalog profile: the same times as the
    datasheet's figures given by hand."""
    named = llm.profile("llama2_7b", llm.Decode(context=2048), dtype=HALF, hardware="h100-sxm")
    assert named.roofline.decode_seconds == pytest.approx(decode.roofline.decode_seconds, rel=1e-3)
