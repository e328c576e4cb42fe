"""A generation's decode steps summed from a few traces equal the sum over every traced step:
a decode step's cost is affine in the context, piecewise where a sliding window fills."""

import pytest

import flopcount.runtime as rt
from flopcount import llm, models
from flopcount.llm.cache import breakpoints
from flopcount.llm.decoders import NativeDecoder
from flopcount.llm.generation import decode_steps
from flopcount.llm.phases import Decode
from flopcount.llm.step import Counts, count_step

# small models of every family; mistral and phi3 slide over 16 positions
CASES = [("llama", {}), ("mistral", {}), ("phi3", {}), ("qwen2", {}), ("gemma", {}), ("mixtral", {}),
         ("gpt2", {"n_layer": 2, "vocab_size": 1000})]


def _meta(name, config):
    with rt.meta():
        return NativeDecoder(models.get(name, **config), name)


def _traced(decoder, context, batch=2):
    phase = Decode(context)
    return count_step(decoder, decoder.trace(phase, batch), phase, batch)


@pytest.mark.parametrize("name,config", CASES, ids=[c[0] for c in CASES])
def test_summed_steps_equal_every_step_traced(name, config):
    model = _meta(name, config)
    contexts = range(3, 24)  # across the small windows' fill at context 15
    summed = decode_steps(model, contexts, 2)
    every = Counts()
    for c in contexts:
        step = _traced(model, c)
        every.add(step.total)
        at = Counts()
        for op in summed.at(c):
            at.add(op)
        assert at.counts() == step.total.counts(), c
    assert summed.total.counts() == every.counts()
    assert len(summed.traced) < len(contexts)


def test_sliding_windows_split_the_contexts_where_the_cache_fills():
    model = _meta("mistral", {})
    assert breakpoints(model.layers, range(3, 24)) == [15]
    summed = decode_steps(model, range(3, 24), 1)
    assert [(p.first, p.steps) for p in summed.pieces] == [(3, 12), (15, 9)]
    full = summed.pieces[1]
    assert all(s.counts() == Counts().counts() for s in full.slope)  # past the fill: constant
    assert any(s.kv_read > 0 for s in summed.pieces[0].slope)


def test_generate_is_one_prefill_and_new_tokens_minus_one_decode_steps():
    # generate(max_new_tokens=5) makes 5 forward passes: the prefill yields the first new token
    report = llm.profile("llama", llm.Generate(prompt=10, new_tokens=5), batch=2)
    prefill = llm.profile("llama", llm.Prefill(10), batch=2).prefill
    assert report.prefill.total.counts() == prefill.total.counts()
    assert report.decode.contexts == range(10, 14)
    total = Counts()
    total.add(prefill.total)
    for c in range(10, 14):
        total.add(llm.profile("llama", llm.Decode(c), batch=2).decode.total)
    assert report.total.counts() == total.counts()
    assert report.kv_cache_bytes == llm.kv_cache_bytes("llama", 14, 2, rt.float32)
    one = llm.profile("llama", llm.Generate(prompt=10, new_tokens=1), batch=2)
    assert one.decode is None and one.total.counts() == prefill.total.counts()
