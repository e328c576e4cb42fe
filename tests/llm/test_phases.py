"""Phases as inputs: what each phase feeds the decoder, and the errors for phases that make no sense."""

import pytest

import flopcount.runtime as rt
from flopcount import llm, models
from flopcount.llm.phases import kv_cache_layout


def _meta(name):
    with rt.meta():
        return models.get(name)


def test_decode_inputs_are_one_token_and_a_cache_of_the_context():
    model = _meta("mistral")  # window 16: a sliding layer keeps 15 positions
    inputs = llm.Decode(context=40).step_inputs(model, 3, rt.float16)
    assert inputs["input_ids"].shape == (3, 1) and inputs["use_cache"] is True
    pairs = inputs["past_key_values"]
    assert len(pairs) == 2 and all(k.shape == v.shape == (3, 2, 15, 32) for k, v in pairs)
    assert all(k.dtype is rt.float16 and k.device.type == "meta" for k, _ in pairs)
    assert inputs["position_ids"].shape == (3, 1)
    llama_pairs = llm.Decode(context=40).step_inputs(_meta("llama"), 1, rt.float32)["past_key_values"]
    assert all(k.shape == (1, 2, 40, 32) for k, _ in llama_pairs)


def test_prefill_and_generate():
    assert llm.Prefill(7).step_inputs(_meta("llama"), 2, rt.float32)["input_ids"].shape == (2, 7)
    gen = llm.Generate(prompt=5, new_tokens=3)
    assert gen.prefill == llm.Prefill(5) and list(gen.contexts) == [5, 6]  # 3 forward passes in all


@pytest.mark.parametrize("kwargs,message", [
    ({"prefill": 8, "decode": True}, "choose one phase, got --prefill and --decode"),
    ({"decode": True}, "--decode needs --context N"),
    ({"context": 5}, "--context goes with --decode"),
    ({"generate": "2048"}, "--generate takes PROMPT:NEW_TOKENS such as 2048:256, got '2048'"),
    ({"generate": "a:b"}, "got 'a:b'"),
    ({"generate": "0:5"}, "generate prompt tokens must be an integer >= 1, got 0"),
    ({"prefill": 0}, "prefill tokens must be an integer >= 1, got 0"),
])
def test_bad_phases_name_the_problem(kwargs, message):
    with pytest.raises(rt.ShapeError, match=message.replace("(", r"\(")):
        llm.parse_phase(**kwargs)


def test_parse_phase():
    assert llm.parse_phase(prefill=2048) == llm.Prefill(2048)
    assert llm.parse_phase(decode=True, context=2048) == llm.Decode(2048)
    assert llm.parse_phase(generate="2048:256") == llm.Generate(2048, 256)
    assert llm.parse_phase() is None


def test_models_without_a_kv_cache_are_refused():
    with pytest.raises(rt.ShapeError, match="LLM phases need a causal language model that keeps a cache.*BertModel"):
        kv_cache_layout(_meta("bert_base"))
    with pytest.raises(rt.ShapeError, match="need a causal language model"):
        llm.profile("resnet18", llm.Decode(4))
    with pytest.raises(rt.ShapeError, match="batch must be an integer >= 1, got 0"):
        llm.profile("llama", llm.Decode(4), batch=0)


def test_a_module_keeps_its_dtype_and_attention_choice():
    model = _meta("llama")
    with pytest.raises(rt.ShapeError, match="the model's parameters are float32, not float16"):
        llm.profile(model, llm.Decode(4), dtype="float16")
    report = llm.profile(model, llm.Decode(4), attn_implementation="sdpa")
    assert report.attn_implementation == "sdpa" and model.config.attn_implementation == "eager"
    assert any(op.op == "scaled_dot_product_attention" for op in report.decode.last.ops)
