"""Published models counted from their config.json alone (no weights): parameters as their model
cards give them, parameters active per token for the mixtures of experts, and the KV cache per
token as serving engines lay it out (grouped-query heads; DeepSeek's latent attention)."""

from __future__ import annotations

import pytest

from flopcount import llm
import published_configs as published

BF16 = 2


def _folder(tmp_path, config: dict) -> str:
    return published.write(tmp_path / config["model_type"], config)


def _needs_torch(config: dict):
    from flopcount.models._hf_architectures import ARCHITECTURES

    if config["architectures"][0] not in ARCHITECTURES:
        pytest.importorskip("torch")
        pytest.importorskip("transformers")


def test_deepseek_v3_parameters_active_parameters_and_latent_cache(tmp_path):
    config = published.DEEPSEEK_V3
    _needs_torch(config)
    path = _folder(tmp_path, config)
    decoder = llm.decoder(path)
    assert round(decoder.params / 1e9, 1) == 671.0
    assert round(decoder.moe.active_params / 1e9, 1) == 37.6     # "37B activated": 37.55 B with embeddings
    # 61 layers cache the 512-wide latent and the 64-wide rotary key, in bf16
    assert llm.kv_bytes_per_token(path, "bfloat16") == 61 * (512 + 64) * BF16 == 70_272
    assert {layer.kind for layer in decoder.layers} == {"latent"}


def test_qwen3_30b_a3b_parameters_and_active_parameters(tmp_path):
    config = published.QWEN3_30B_A3B
    _needs_torch(config)
    decoder = llm.decoder(_folder(tmp_path, config))
    assert round(decoder.params / 1e9, 1) == 30.5
    assert round(decoder.moe.active_params / 1e9, 1) == 3.4       # with the embedding table's row and lm_head
    assert round(decoder.moe.active_params_without_embeddings / 1e9, 1) == 3.0   # "A3B"
    assert (decoder.moe.layers, decoder.moe.experts, decoder.moe.top_k) == (48, 128, 8)


def test_llama_31_405b_parameters_and_kv_cache(tmp_path):
    config = published.LLAMA_31_405B
    _needs_torch(config)
    path = _folder(tmp_path, config)
    assert round(llm.decoder(path).params / 1e9, 1) == 405.9
    # 126 layers, keys and values of 8 KV heads of 128, in bf16
    assert llm.kv_bytes_per_token(path, "bfloat16") == 126 * 2 * 8 * 128 * BF16 == 516_096


def test_gpt_oss_20b_parameters_active_parameters_and_sliding_layers(tmp_path):
    """OpenAI's model card: 21 B parameters, 3.6 B active; every other layer slides over 128."""
    config = published.GPT_OSS_20B
    _needs_torch(config)
    path = _folder(tmp_path, config)
    decoder = llm.decoder(path)
    assert round(decoder.params / 1e9, 1) == 20.9
    assert round(decoder.moe.active_params_without_embeddings / 1e9, 1) == 3.6
    kinds = [layer.kind for layer in decoder.layers]
    assert kinds == ["sliding", "full"] * 12
    # 8 KV heads of 64 in bf16; a sliding layer keeps 127 positions
    per_layer = 2 * 8 * 64 * BF16
    assert llm.kv_cache_bytes(path, 8192, 1, "bfloat16") == 12 * per_layer * (127 + 8192)
