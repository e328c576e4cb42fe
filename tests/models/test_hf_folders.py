"""Hugging Face folders: for every natively built architecture, a small random model saved with
``save_pretrained`` (safetensors) gives transformers' parameter count, the same totals as the
PyTorch path on the transformers model itself, and, on the loaded weights, transformers'
outputs to float32 precision. Plus shards, dtypes kept, the PyTorch path for other
architectures, and what is refused (pickled weights, code in the folder)."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import flopcount  # noqa: E402
import flopcount.runtime as rt  # noqa: E402
from flopcount.models import _hf_folder  # noqa: E402
from flopcount.models._hf_architectures import ARCHITECTURES  # noqa: E402
from flopcount.runtime.errors import FlopcountError, ModelFileError  # noqa: E402

SMALL_TEXT = dict(num_hidden_layers=2, hidden_size=32, num_attention_heads=4, intermediate_size=64, vocab_size=120)


def _configs():
    t = transformers
    return {
        "BertModel": t.BertConfig(**SMALL_TEXT),
        "BertForMaskedLM": t.BertConfig(**SMALL_TEXT),
        "BertForSequenceClassification": t.BertConfig(**SMALL_TEXT, num_labels=3),
        "RobertaModel": t.RobertaConfig(**SMALL_TEXT),
        "RobertaForMaskedLM": t.RobertaConfig(**SMALL_TEXT),
        "RobertaForSequenceClassification": t.RobertaConfig(**SMALL_TEXT, num_labels=4),
        "DistilBertModel": t.DistilBertConfig(n_layers=2, dim=32, n_heads=4, hidden_dim=64, vocab_size=120),
        "DistilBertForMaskedLM": t.DistilBertConfig(n_layers=2, dim=32, n_heads=4, hidden_dim=64, vocab_size=120),
        "DistilBertForSequenceClassification": t.DistilBertConfig(n_layers=2, dim=32, n_heads=4, hidden_dim=64,
                                                                  vocab_size=120, sinusoidal_pos_embds=True),
        "ViTModel": t.ViTConfig(num_hidden_layers=2, hidden_size=32, num_attention_heads=4, intermediate_size=64,
                                image_size=32, patch_size=8),
        "ViTForImageClassification": t.ViTConfig(num_hidden_layers=2, hidden_size=32, num_attention_heads=4,
                                                 intermediate_size=64, image_size=32, patch_size=8, num_labels=5),
        "GPT2LMHeadModel": t.GPT2Config(n_layer=2, n_embd=32, n_head=4, vocab_size=120, bos_token_id=0,
                                        eos_token_id=0),
        "LlamaForCausalLM": t.LlamaConfig(num_hidden_layers=2, hidden_size=32, num_attention_heads=4,
                                          num_key_value_heads=2, intermediate_size=64, vocab_size=120,
                                          bos_token_id=0, eos_token_id=0),
        **{name: getattr(t, config)(num_hidden_layers=2, hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
                                    intermediate_size=64, vocab_size=120, bos_token_id=0, eos_token_id=0,
                                    pad_token_id=0, **extra)
           for name, config, extra in (("MistralForCausalLM", "MistralConfig", {}),
                                       ("Qwen2ForCausalLM", "Qwen2Config", {}),
                                       ("GemmaForCausalLM", "GemmaConfig", dict(head_dim=8)),
                                       ("Phi3ForCausalLM", "Phi3Config", {}),
                                       ("MixtralForCausalLM", "MixtralConfig",
                                        dict(num_local_experts=4, num_experts_per_tok=2)))},
        **{name: getattr(t, config)(num_hidden_layers=2, hidden_size=32, num_attention_heads=4, num_key_value_heads=4,
                                    intermediate_size=64, moe_intermediate_size=16, vocab_size=120, bos_token_id=0,
                                    eos_token_id=0, pad_token_id=0, n_routed_experts=4, num_experts_per_tok=2,
                                    n_shared_experts=1, first_k_dense_replace=1, kv_lora_rank=16, qk_rope_head_dim=8,
                                    qk_nope_head_dim=8, v_head_dim=8, **extra)
           for name, config, extra in (("DeepseekV3ForCausalLM", "DeepseekV3Config",
                                        dict(n_group=2, topk_group=1, q_lora_rank=24)),
                                       ("DeepseekV2ForCausalLM", "DeepseekV2Config", dict(q_lora_rank=None)))},
    }


def saved(tmp_path_factory, name: str, config=None, **save):
    torch.manual_seed(0)
    model = getattr(transformers, name)(config or _configs()[name]).eval()
    if name in RECORDED:
        model.set_experts_implementation("eager")
    path = tmp_path_factory.mktemp(name) / name
    model.save_pretrained(str(path), **save)
    return model, str(path)


def example(name: str, batch: int = 2):
    """Inputs for the transformers model and ours: token ids, or pixels."""
    generator = torch.Generator().manual_seed(1)
    if ARCHITECTURES[name].inputs == "image":
        return "pixel_values", torch.randn(batch, 3, 32, 32, generator=generator)
    return "input_ids", torch.randint(1, 120, (batch, 9), generator=generator)


# decoders the zoo writes with a fused RMSNorm and no rotary attention_scaling (see the test)
DECODERS_AS_WRITTEN = {"LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "GemmaForCausalLM",
                       "Phi3ForCausalLM", "MixtralForCausalLM", "DeepseekV3ForCausalLM", "DeepseekV2ForCausalLM"}
# transformers' eager expert dispatch reads the router's values (nonzero, a loop over the experts
# hit): torch.export refuses it, and the PyTorch path records one run on the example's values.
# Its default "grouped_mm" experts sort tokens by expert with ops flopcount has no mapping for, so
# the torch side uses the eager experts.
RECORDED = {"MixtralForCausalLM", "DeepseekV3ForCausalLM", "DeepseekV2ForCausalLM"}


def flops_outside(report, *module_types: str) -> int:
    """The report's FLOPs less those of every module whose class name ends with one of ``module_types``."""
    inside = sum(r.flops for r in report.rows if r.kind != "op" and r.type.endswith(module_types))
    return report.flops - inside


def first_output(value):
    if hasattr(value, "logits"):
        return value.logits
    if hasattr(value, "last_hidden_state"):
        return value.last_hidden_state
    return value[0] if isinstance(value, (tuple, list)) else value


def test_every_architecture_of_the_table_is_checked():
    assert sorted(_configs()) == sorted(ARCHITECTURES)


@pytest.mark.parametrize("name", sorted(ARCHITECTURES))
def test_a_saved_folder_counts_and_computes_as_transformers(name, tmp_path_factory):
    hf, path = saved(tmp_path_factory, name)
    counted = flopcount.profile(path, device="meta")
    moe = name in RECORDED   # a mixture of experts on meta routes by the balanced policy, and says so
    assert counted.device == "meta" and counted.notes == (["MoE routing: balanced (the tokens' k choices spread "
                                                           "evenly over the experts, as a trace on shapes has no "
                                                           "router values)"] if moe else [])
    assert counted.params == hf.num_parameters()
    key, x = example(name, batch=1)
    shape = tuple(counted.input_shapes[0])
    through_torch = flopcount.profile(hf, **{key: torch.zeros(shape, dtype=x.dtype)})
    if name in RECORDED:
        assert through_torch.notes[0].startswith(f"torch.export could not capture {name}")
    else:
        assert not through_torch.notes   # captured by torch.export, every op converted
    # MACs do not depend on the routing: every (token, expert) assignment runs one expert MLP
    assert (counted.macs, counted.params) == (through_torch.macs, through_torch.params)
    if name in DECODERS_AS_WRITTEN:
        # the zoo's decoder runs RMSNorm as one op (its rule: 6 FLOPs per element), transformers as
        # pow, mean, add, rsqrt, mul, mul; and transformers' rotary embedding multiplies cos and sin by
        # attention_scaling (1.0 here), which the zoo's leaves out: the FLOPs differ there, nowhere else
        # (and in the MoE block, whose routing ops transformers' eager dispatch spells otherwise:
        # DeepSeek-V3's group-limited choice builds its group mask with a scatter, the zoo's with
        # one_hot)
        skip = ("RMSNorm", "RotaryEmbedding", "SparseMoeBlock", "MoE", "Moe")
        assert flops_outside(counted, *skip) == flops_outside(through_torch, *skip)
        assert counted.flops != through_torch.flops
    else:
        assert counted.flops == through_torch.flops

    folder = _hf_folder.load(path, weights=True)
    assert folder.architecture == name and not folder.torch
    key, x = example(name)
    with torch.no_grad():
        expected = first_output(hf(**{key: x})).numpy()
    ours = folder.model(**{key: rt.tensor(x.numpy())})
    ours = (ours[0] if isinstance(ours, tuple) else ours).numpy()
    np.testing.assert_allclose(ours, expected, rtol=1e-4, atol=2e-5)


def moe_macs(config, tokens: int) -> int:
    """One MoE block by hand: the router (tokens x hidden x experts), then top-k routing: each
    token's k experts each run a SwiGLU MLP (gate, up, down: 3 x hidden x ffn)."""
    hidden, ffn = config.hidden_size, config.intermediate_size
    return tokens * hidden * config.num_local_experts + tokens * config.num_experts_per_tok * 3 * hidden * ffn


@pytest.mark.parametrize("original_format", [True, False], ids=["per-expert", "stacked"])
def test_mixtral_checkpoints_per_expert_or_stacked(original_format, tmp_path_factory):
    # transformers 5 writes the published layout back by default (block_sparse_moe.experts.{e}.w1/w2/w3);
    # save_original_format=False writes its in-memory one (mlp.experts.gate_up_proj, down_proj)
    hf, path = saved(tmp_path_factory, "MixtralForCausalLM", save_original_format=original_format)
    from safetensors import safe_open

    names = set(safe_open(os.path.join(path, "model.safetensors"), "np").keys())
    expected_name = ("model.layers.1.block_sparse_moe.experts.3.w3.weight" if original_format
                     else "model.layers.1.mlp.experts.gate_up_proj")
    assert expected_name in names
    model = _hf_folder.load(path, weights=True).model
    ids = torch.randint(0, 120, (3, 11), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        expected = hf(ids).logits.numpy()
    np.testing.assert_allclose(model(rt.tensor(ids.numpy())).numpy(), expected, rtol=1e-4, atol=2e-5)

    counted = flopcount.profile(path, device="meta", input_shape={"input_ids": (1, 64)})
    blocks = [r for r in counted.rows if r.kind != "op" and r.type == "MixtralSparseMoeBlock"]
    assert len(blocks) == hf.config.num_hidden_layers
    assert all(r.macs == moe_macs(hf.config, 64) for r in blocks)


def test_mixtral_experts_that_do_not_stack_are_one_line(tmp_path_factory):
    _, path = saved(tmp_path_factory, "MixtralForCausalLM")
    from safetensors.numpy import load_file, save_file

    file = os.path.join(path, "model.safetensors")
    tensors = load_file(file)
    del tensors["model.layers.0.block_sparse_moe.experts.2.w3.weight"]
    save_file(tensors, file, metadata={"format": "pt"})
    with pytest.raises(ModelFileError, match=r"model\.layers\.0\.block_sparse_moe\.experts\.2\.w3\.weight is "
                                             r"missing \(4 experts in model\.layers\.0\.block_sparse_moe"):
        _hf_folder.load(path, weights=True)
    tensors["model.layers.0.block_sparse_moe.experts.2.w3.weight"] = np.zeros((3, 3), np.float32)
    save_file(tensors, file, metadata={"format": "pt"})
    with pytest.raises(ModelFileError, match=r"block_sparse_moe\.experts: the experts' w1/w3/w2 weights do not stack"):
        _hf_folder.load(path, weights=True)


def test_text_models_take_token_ids_of_a_sequence_length(tmp_path_factory):
    _, path = saved(tmp_path_factory, "BertModel")
    default = flopcount.profile(path, device="meta")
    assert default.input_shapes == [(1, 128)]
    longer = flopcount.profile(path, device="meta", input_shape={"input_ids": (1, 256)})
    assert longer.input_shapes == [(1, 256)] and longer.macs > 2 * default.macs   # attention grows as L²


def test_sharded_weights_load_from_the_index(tmp_path_factory):
    hf, path = saved(tmp_path_factory, "LlamaForCausalLM", max_shard_size="40KB")
    assert os.path.isfile(os.path.join(path, "model.safetensors.index.json"))
    assert len(_hf_folder.weight_files(path)) > 1
    ids = torch.randint(0, 120, (1, 7))
    with torch.no_grad():
        expected = hf(ids).logits.numpy()
    model = _hf_folder.load(path, weights=True).model
    np.testing.assert_allclose(model(rt.tensor(ids.numpy())).numpy(), expected, rtol=1e-4, atol=2e-5)


def test_weights_are_mapped_and_keep_their_dtype(tmp_path_factory):
    hf, path = saved(tmp_path_factory, "GPT2LMHeadModel")
    hf.to(torch.bfloat16).save_pretrained(path)
    model = _hf_folder.load(path, weights=True).model
    weight = model.transformer.h[0].attn.c_attn.weight
    assert weight.dtype is rt.bfloat16 and isinstance(weight.data, np.memmap) or weight.data.base is not None
    counted = flopcount.profile(path, device="meta")
    assert counted.memory.parameters == {"bfloat16": 2 * hf.num_parameters()}


def test_transformers_4_vit_names_are_renamed(tmp_path_factory):
    hf, path = saved(tmp_path_factory, "ViTModel")
    from safetensors.numpy import load_file, save_file

    file = os.path.join(path, "model.safetensors")
    old = {}
    for name, array in load_file(file).items():   # the 4.x layout: encoder.layer.{i}.attention.attention.query
        name = name.replace("layers.", "encoder.layer.").replace("attention.q_proj", "attention.attention.query")
        name = name.replace("attention.k_proj", "attention.attention.key").replace("attention.v_proj",
                                                                                   "attention.attention.value")
        name = name.replace("attention.o_proj", "attention.output.dense").replace("mlp.fc1", "intermediate.dense")
        old[name.replace("mlp.fc2", "output.dense")] = array
    save_file(old, file, metadata={"format": "pt"})
    x = torch.randn(1, 3, 32, 32)
    with torch.no_grad():
        expected = hf(x).last_hidden_state.numpy()
    hidden, _ = _hf_folder.load(path, weights=True).model(rt.tensor(x.numpy()))
    np.testing.assert_allclose(hidden.numpy(), expected, rtol=1e-4, atol=2e-5)


def test_other_architectures_go_through_the_pytorch_path(tmp_path_factory):
    config = transformers.AlbertConfig(num_hidden_layers=2, hidden_size=32, num_attention_heads=4,
                                       intermediate_size=64, embedding_size=16, vocab_size=120)
    hf, path = saved(tmp_path_factory, "AlbertModel", config)
    report = flopcount.profile(path, device="meta")
    assert report.notes == ["AlbertModel is not built natively (the zoo does not build it natively): counted "
                            "through the PyTorch path"]
    direct = flopcount.profile(hf, input_ids=torch.zeros(1, 128, dtype=torch.long))
    assert (report.macs, report.flops, report.params) == (direct.macs, direct.flops, direct.params)
    assert report.params == hf.num_parameters()


def test_a_setting_the_zoo_lacks_takes_the_pytorch_path(tmp_path_factory):
    config = transformers.BertConfig(**SMALL_TEXT, position_embedding_type="relative_key")
    _, path = saved(tmp_path_factory, "BertModel", config)
    report = flopcount.profile(path, device="meta")
    assert "its config sets position_embedding_type='relative_key'" in report.notes[0]


def test_pickled_weights_and_code_are_refused(tmp_path_factory, tmp_path):
    hf, path = saved(tmp_path_factory, "BertModel")
    os.remove(os.path.join(path, "model.safetensors"))   # the weights as transformers 4 saved them by default
    torch.save(hf.state_dict(), os.path.join(path, "pytorch_model.bin"))
    with pytest.raises(ModelFileError, match=r"its weights are only in pytorch_model\.bin, a pickle"):
        _hf_folder.load_weights(_hf_folder.load(path, weights=False).model, path)
    assert flopcount.profile(path, device="meta").params > 0       # counting needs no weights
    with open(os.path.join(path, "config.json")) as f:
        data = json.load(f)
    data.update(architectures=["MyModel"], auto_map={"AutoModel": "modeling_my.MyModel"})
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(data, f)
    with pytest.raises(FlopcountError, match=r"MyModel needs the model's own Python code \(auto_map, .*it was not run"):
        flopcount.profile(path, device="meta")


def test_a_weights_file_alone(tmp_path_factory, tmp_path):
    _, path = saved(tmp_path_factory, "DistilBertModel")
    report = flopcount.profile(os.path.join(path, "model.safetensors"), device="meta")
    assert report.notes[0] == "model.safetensors holds weights only: profiling its folder DistilBertModel, " \
                              "which has a config.json"
    lone = tmp_path / "weights.safetensors"
    lone.write_bytes(open(os.path.join(path, "model.safetensors"), "rb").read())
    with pytest.raises(ModelFileError, match=r"holds weights only .* the config.json beside it"):
        flopcount.profile(str(lone))


def test_a_70b_config_builds_on_meta_without_weights(tmp_path):
    config = dict(architectures=["LlamaForCausalLM"], model_type="llama", vocab_size=128256, hidden_size=8192,
                  intermediate_size=28672, num_hidden_layers=80, num_attention_heads=64, num_key_value_heads=8,
                  max_position_embeddings=8192, rms_norm_eps=1e-5, rope_theta=500000.0, dtype="bfloat16",
                  tie_word_embeddings=False)
    (tmp_path / "config.json").write_text(json.dumps(config))
    folder = _hf_folder.load(str(tmp_path), weights=False)
    # embeddings and head, per layer q/o (8192²) + k/v (8192·1024) + MLP (3·8192·28672) + 2 norms, final norm
    layer = 2 * 8192 * 8192 + 2 * 8192 * 1024 + 3 * 8192 * 28672 + 2 * 8192
    expected = 2 * 128256 * 8192 + 80 * layer + 8192
    params = list(folder.model.parameters())
    assert sum(p.numel() for p in params) == expected == 70_553_706_496
    assert all(p.data is None and p.dtype is rt.bfloat16 for p in params)


def test_mixtral_8x7b_config_builds_on_meta(tmp_path):
    # config.json as published with mistralai/Mixtral-8x7B-v0.1 (transformers 4's field names)
    config = dict(architectures=["MixtralForCausalLM"], model_type="mixtral", vocab_size=32000, hidden_size=4096,
                  intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8,
                  max_position_embeddings=32768, rms_norm_eps=1e-5, rope_theta=1e6, sliding_window=None,
                  num_experts_per_tok=2, num_local_experts=8, output_router_logits=False,
                  router_aux_loss_coef=0.02, tie_word_embeddings=False, torch_dtype="bfloat16")
    (tmp_path / "config.json").write_text(json.dumps(config))
    folder = _hf_folder.load(str(tmp_path), weights=False)
    # per layer attention q/o (4096²) + k/v (4096·1024), router (8·4096), 8 experts of 3·4096·14336, 2 norms
    layer = 2 * 4096 * 4096 + 2 * 4096 * 1024 + 8 * 4096 + 8 * 3 * 4096 * 14336 + 2 * 4096
    params = list(folder.model.parameters())
    assert sum(p.numel() for p in params) == 2 * 32000 * 4096 + 32 * layer + 4096 == 46_702_792_704
    assert all(p.data is None and p.dtype is rt.bfloat16 for p in params)
    assert folder.model.config.rope_theta == 1e6 and folder.model.config.num_experts_per_tok == 2
