"""The serving simulator against the laws it must keep: Little's law on its own output, one
prefill and one decode step per token when nothing queues, the largest batch's step rate when
everything does, prefill work cut by the prefix-hit share, and the KV blocks in use never above
what the memory holds (a property over random workloads)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flopcount import hardware, llm, serving
from flopcount.serving.steptime import prefill_square

H100 = hardware.get("h100-sxm")


@pytest.fixture(scope="module")
def traced():
    net = llm.decoder("llama")
    return net, serving.fit(net, H100, max_tokens=512)


def _roofline(net, phase, batch: int, key: str) -> float:
    return llm.profile_decoder(net, phase, batch=batch, hardware=H100).to_dict()["roofline"][key]


def test_step_times_are_the_traced_steps(traced):
    net, step = traced
    for t in (1, 16, 256):   # grid sizes: the traced prefill and decode steps exactly
        assert step(t, square=prefill_square(t, 0)) == pytest.approx(
            _roofline(net, llm.Prefill(t), 1, "time_to_first_token_s"), rel=1e-9)
    for batch, context in ((1, 100), (8, 300), (64, 40)):
        assert step(batch, read=batch * (context + 1)) == pytest.approx(
            _roofline(net, llm.Decode(context), batch, "time_per_output_token_s"), rel=1e-6)
    # between grid sizes, interpolated in log T: within 10% of the trace (8% here)
    assert step(48, read=48 * 201) == pytest.approx(_roofline(net, llm.Decode(200), 48, "time_per_output_token_s"),
                                                   rel=0.10)


def _server(step, blocks=4096, **kw):
    return serving.Server(step, blocks, **kw)


def _requests(rate, duration, prompt, output, seed=0):
    return serving.poisson(rate, duration, serving.Lengths.parse(prompt), serving.Lengths.parse(output), seed)


def test_far_below_saturation_ttft_is_one_prefill_and_tpot_one_decode_step(traced):
    net, step = traced
    run = serving.simulate(_requests(0.2, 60, "64", "9"), _server(step))
    assert len(run.requests) > 3
    prefill = _roofline(net, llm.Prefill(64), 1, "time_to_first_token_s")
    decode = [_roofline(net, llm.Decode(c), 1, "time_per_output_token_s") for c in range(64, 64 + 8)]
    for seq in run.requests:
        assert seq.first_token - seq.request.arrival == pytest.approx(prefill, rel=1e-9)
        assert (seq.finish - seq.first_token) / 8 == pytest.approx(np.mean(decode), rel=1e-6)


def test_littles_law_holds_on_its_output(traced):
    _, step = traced
    for rate in (1.0, 30.0, 300.0):
        run = serving.simulate(_requests(rate, 10, "uniform:16:200", "uniform:1:64"), _server(step, blocks=300))
        n = len(run.requests)
        mean_latency = np.mean([s.finish - s.request.arrival for s in run.requests])
        assert run.area / run.end == pytest.approx(n / run.end * mean_latency, rel=1e-9)


def test_at_saturation_throughput_is_the_largest_batchs_step_rate(traced):
    _, step = traced
    batch, output = 32, 200
    server = _server(step, max_batch=batch)
    capacity = serving.api.saturation(server, serving.Lengths.parse("1"), serving.Lengths.parse(str(output)))
    # every step decodes the whole batch, at a mean context of about half the output
    step_rate = 1 / step(batch, read=batch * (output // 2 + 1))
    assert capacity * output == pytest.approx(batch * step_rate, rel=0.05)


def test_prefix_hits_cut_prefill_work_by_their_share(traced):
    _, step = traced
    requests = _requests(5, 20, "uniform:32:512", "4")
    cold = serving.simulate(requests, _server(step))
    warm = serving.simulate(requests, _server(step, prefix_hit=0.5))
    assert cold.prefill_tokens == sum(r.prompt for r in requests)
    assert warm.prefill_tokens == sum(r.prompt - int(0.5 * (r.prompt - 1)) for r in requests)
    assert warm.prefill_tokens / cold.prefill_tokens == pytest.approx(0.5, abs=0.01)
    assert np.mean([s.first_token - s.request.arrival for s in warm.requests]) < \
        np.mean([s.first_token - s.request.arrival for s in cold.requests])


def test_speculative_decoding_yields_every_token_in_fewer_steps(traced):
    _, step = traced
    requests = _requests(0.2, 40, "32", "41")
    plain = serving.simulate(requests, _server(step))
    always = serving.simulate(requests, _server(step, draft=step, draft_tokens=4, acceptance=1.0))
    never = serving.simulate(requests, _server(step, draft=step, draft_tokens=4, acceptance=0.0))
    per_request = len(plain.steps) // len(requests)
    assert per_request == 1 + 40                                   # a prefill, then a token a step
    assert len(always.steps) // len(requests) == 1 + math.ceil(40 / 5)   # k accepted + the target's own
    assert len(never.steps) == len(plain.steps)
    assert never.busy_seconds > plain.busy_seconds                  # the drafts cost and gain nothing


FAST = serving.StepTime((1, 64), (1e-3, 2e-3), (1e-7, 1e-7), (1e-8, 1e-8), 0.0)


@settings(max_examples=60, deadline=None)
@given(rate=st.floats(0.5, 200), prompt=st.integers(1, 300), output=st.integers(1, 120),
       block=st.sampled_from([1, 4, 16]), batch=st.integers(1, 16), tokens=st.integers(8, 512),
       spare=st.integers(0, 200), seed=st.integers(0, 10**6))
def test_kv_blocks_in_use_never_exceed_the_memory(rate, prompt, output, block, batch, tokens, spare, seed):
    needed = math.ceil((prompt + output) / block)
    server = serving.Server(FAST, needed + spare, block_size=block, max_batch=batch, max_tokens_per_step=tokens,
                            seed=seed)
    requests = serving.poisson(rate, 2.0, serving.Lengths.parse(str(prompt)), serving.Lengths.parse(str(output)),
                               seed) or [serving.Request(0, 0.5, prompt, output)]
    run = serving.simulate(requests, server)
    assert max(s[3] for s in run.steps) <= server.kv_blocks
    assert all(s.generated == s.request.output and s.finish >= s.first_token >= s.request.arrival
               for s in run.requests)
    assert len(run.requests) == len(requests)
    assert run.area / run.end == pytest.approx(
        len(requests) / run.end * np.mean([s.finish - s.request.arrival for s in run.requests]), rel=1e-9)


def test_the_weights_must_fit():
    with pytest.raises(serving.WorkloadError, match=r"do not fit in 90% of 1 x 24 GB"):
        serving.kv_blocks(hardware.get("l4"), 1, 27 * 10**9, 524288, 16)
    assert serving.kv_blocks(H100, 2, 13_476_831_232, 524_288, 16) == int(
        (2 * 80e9 * 0.9 - 13_476_831_232) // (524_288 * 16))
