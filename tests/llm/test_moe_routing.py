"""Mixture-of-experts layers of transformers models on shapes and on data.

The routing flopcount puts in place computes what transformers' own experts compute (logits
against transformers' eager implementation, on data); with ``real`` it logs the router's own
choice, token by token; with ``balanced`` and ``worst`` it changes which experts run, so the
expert weights a step reads, and never the MACs.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
if int(transformers.__version__.split(".")[0]) < 5:
    pytest.skip("LLM phases through the PyTorch path need transformers 5", allow_module_level=True)

from flopcount import llm  # noqa: E402
from flopcount.runtime.torch.moe_routing import routed  # noqa: E402
from tiny_configs import config  # noqa: E402

F32 = 4


def _model(model_type: str):
    torch.manual_seed(0)
    return transformers.AutoModelForCausalLM.from_config(config(model_type)).eval()


@pytest.mark.parametrize("model_type", ["qwen3_moe", "deepseek_v3", "gpt_oss", "granitemoe", "jamba", "glm4_moe",
                                        "llama4_text", "mixtral"])
def test_routed_experts_compute_what_transformers_computes(model_type):
    model = _model(model_type)
    ids = torch.randint(0, 512, (2, 7), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        expected = model(input_ids=ids).logits
        for policy in ("real",):
            with routed(model, policy):
                got = model(input_ids=ids).logits
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-5)
    with torch.no_grad():   # and the model is left as it was
        torch.testing.assert_close(model(input_ids=ids).logits, expected)


def test_real_routing_is_the_routers_choice_token_by_token(tmp_path):
    model = _model("qwen3_moe")
    model.save_pretrained(tmp_path)
    report = llm.profile(str(tmp_path), llm.Decode(context=6), batch=2, moe_routing="real")
    # the same ids the decoder draws (seeded), through transformers' own router
    vocab = model.config.vocab_size
    context = torch.randint(0, vocab, (2, 6), generator=torch.Generator().manual_seed(0))
    step = torch.randint(0, vocab, (2, 1), generator=torch.Generator().manual_seed(1))
    chosen: list = []
    hooks = [gate.register_forward_hook(lambda module, args, out: chosen.append(out[2].reshape(-1).tolist()))
             for name, gate in model.named_modules() if name.endswith("mlp.gate")]
    cache = transformers.DynamicCache(config=model.config)
    with torch.no_grad():
        model(input_ids=context, cache=cache, use_cache=True)
        chosen.clear()
        model(input_ids=step, cache=cache, use_cache=True)
    for h in hooks:
        h.remove()
    assert [experts for _, experts in report.routing_choices] == chosen
    assert [layer for layer, _ in report.routing_choices] == ["model.layers.0.mlp.experts", "model.layers.1.mlp.experts"]
    assert any("MoE routing: real" in note for note in report.notes)


def test_policies_change_the_experts_read_not_the_macs(tmp_path):
    model = _model("qwen3_moe")
    model.save_pretrained(tmp_path)
    cfg = model.config
    reports = {p: llm.profile(str(tmp_path), llm.Decode(context=16), batch=3, moe_routing=p)
               for p in ("balanced", "worst")}
    macs = {p: r.decode.last.total.macs for p, r in reports.items()}
    assert macs["balanced"] == macs["worst"]
    expert = 3 * cfg.hidden_size * cfg.moe_intermediate_size * F32
    reads = {p: sum(op.weight_read for op in r.decode.last.ops if op.scope.endswith("mlp.experts"))
             for p, r in reports.items()}
    layers, k, experts = cfg.num_hidden_layers, cfg.num_experts_per_tok, cfg.num_experts
    assert reads["worst"] == layers * k * expert                          # every token on experts 0..k-1
    assert reads["balanced"] == layers * min(experts, 3 * k) * expert     # 6 choices over 4 experts: all


def test_total_and_active_parameters_of_a_small_moe():
    model = _model("qwen3_moe")
    cfg = model.config
    with torch.device("meta"):
        meta = transformers.AutoModelForCausalLM.from_config(cfg)
    moe = llm.decoder(meta).moe
    expert = 3 * cfg.hidden_size * cfg.moe_intermediate_size
    assert (moe.layers, moe.experts, moe.top_k, moe.expert_params) == (2, 4, 2, expert)
    assert moe.total_params == model.num_parameters()
    assert moe.active_params == model.num_parameters() - 2 * (4 - 2) * expert
