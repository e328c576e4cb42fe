"""Every decoder transformers builds, in every phase: small random-weight folders made here with
transformers (``save_pretrained``), counted from the folder as a user would.

For each architecture: the prefill, a decode step and a generation count; the parameters equal
transformers' own count; each layer's cache per token equals the formula from the config for
its kind (keys and values of the KV heads, MLA's latent and rotary key, a Mamba or linear-
attention layer's fixed state), and the whole cache after a decode step equals the bytes of
transformers' own cache object after the same step, run on data.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
if int(transformers.__version__.split(".")[0]) < 5:
    pytest.skip("LLM phases through the PyTorch path need transformers 5", allow_module_level=True)

from flopcount import llm  # noqa: E402
from flopcount.llm.torch_decoder import cache_state  # noqa: E402
from tiny_configs import TINY, config  # noqa: E402

F32 = 4
CONTEXT = 64


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """{model_type: path} of a random-weight folder per architecture (made on first use)."""
    root = tmp_path_factory.mktemp("hf")
    made: dict = {}

    def folder(model_type: str):
        if model_type not in made:
            torch.manual_seed(0)
            model = transformers.AutoModelForCausalLM.from_config(config(model_type)).eval()
            path = root / model_type
            model.save_pretrained(path)
            made[model_type] = (str(path), model)
        return made[model_type]

    return folder


def _attention_per_token(cfg) -> int:
    if cfg.model_type == "gpt2":
        return 2 * cfg.n_embd
    if hasattr(cfg, "kv_lora_rank"):
        return cfg.kv_lora_rank + cfg.qk_rope_head_dim
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    return 2 * cfg.num_key_value_heads * head_dim


def _state(cfg) -> int:
    """One recurrent layer's conv and SSM (or linear-attention) state, per sequence."""
    kind = cfg.model_type
    if kind == "mamba":
        inner = cfg.expand * cfg.hidden_size
        return inner * cfg.conv_kernel + inner * cfg.state_size
    if kind == "jamba":
        inner = cfg.mamba_expand * cfg.hidden_size
        return inner * cfg.mamba_d_conv + inner * cfg.mamba_d_state
    if kind == "falcon_h1":
        inner = cfg.mamba_d_ssm
        conv = (inner + 2 * cfg.mamba_n_groups * cfg.mamba_d_state) * cfg.mamba_d_conv
        return conv + cfg.mamba_n_heads * cfg.mamba_d_head * cfg.mamba_d_state
    if kind == "qwen3_next":
        keys = cfg.linear_num_key_heads * cfg.linear_key_head_dim
        values = cfg.linear_num_value_heads * cfg.linear_value_head_dim
        conv = (2 * keys + values) * cfg.linear_conv_kernel_dim
        return conv + cfg.linear_num_value_heads * cfg.linear_key_head_dim * cfg.linear_value_head_dim
    raise AssertionError(f"no state formula for {kind}")


def _expected_kind(cfg, index: int, kind: str) -> str:
    """The kind of layer ``index`` by the config (its layer types, or the family's layout)."""
    types = getattr(cfg, "layer_types", None)
    if cfg.model_type == "jamba":
        attention = index % cfg.attn_layer_period == cfg.attn_layer_offset
        return "full" if attention else "state"
    if cfg.model_type == "mamba":
        return "state"
    if cfg.model_type == "falcon_h1":
        return "hybrid"
    if hasattr(cfg, "kv_lora_rank"):
        return "latent"
    if types is not None:
        kind_of = {"full_attention": "full", "sliding_attention": "sliding", "linear_attention": "state",
                   "chunked_attention": "sliding"}
        return kind_of[types[index]]
    return "sliding" if getattr(cfg, "sliding_window", None) else "full"


ARCHITECTURES = sorted(TINY)


@pytest.mark.parametrize("model_type", ARCHITECTURES)
def test_every_phase_counts_with_the_parameters_and_cache_transformers_has(folders, model_type):
    path, model = folders(model_type)
    cfg = model.config
    report = llm.profile(path, llm.Generate(prompt=8, new_tokens=3))
    # three forward passes: the prefill, then two decode steps
    assert report.prefill.queries == 8 and list(report.decode.contexts) == [8, 9]
    assert report.prefill.total.macs > 0 and report.decode.total.macs > 0
    assert report.params == model.num_parameters()
    for index, layer in enumerate(report.layers):
        assert layer.kind == _expected_kind(cfg, index, layer.kind), index
        if layer.kind in ("full", "sliding", "latent", "hybrid"):
            assert layer.per_token == _attention_per_token(cfg), index
        if layer.kind in ("state", "hybrid"):
            assert layer.state_bytes == _state(cfg) * F32, index
        if layer.kind == "sliding":
            window = getattr(cfg, "sliding_window", None) or cfg.attention_chunk_size
            assert layer.max_positions == window - 1
    assert report.kv_bytes_per_token == sum(layer.per_token for layer in report.layers) * F32


def _transformers_cache_after_a_decode_step(model, context: int) -> tuple[int, list]:
    """transformers' own cache after ``context`` tokens and one more, on data: its total bytes
    and each layer's."""
    ids = torch.randint(0, model.config.get_text_config().vocab_size, (1, context + 1))
    cache = transformers.DynamicCache(config=model.config)
    with torch.no_grad():
        model(input_ids=ids[:, :context], cache=cache, use_cache=True)
        model(input_ids=ids[:, context:], cache=cache, use_cache=True)
    tensors = cache_state(cache)
    per_layer = [sum(t.numel() * t.element_size() for name, t in tensors.items() if name.startswith(f"cache_{i}_"))
                 for i in range(len(cache.layers))]
    return sum(per_layer), per_layer


@pytest.mark.parametrize("model_type", ARCHITECTURES)
def test_the_cache_after_a_decode_step_is_transformers_own(folders, model_type):
    path, model = folders(model_type)
    report = llm.profile(path, llm.Decode(CONTEXT))
    total, per_layer = _transformers_cache_after_a_decode_step(model, CONTEXT)
    assert report.decode.last.kv_cache_bytes == total
    assert [layer.bytes(CONTEXT + 1, F32) for layer in report.layers] == per_layer


@pytest.mark.parametrize("model_type", ["mamba", "jamba", "falcon_h1", "qwen3_next"])
def test_a_state_does_not_grow_with_the_context(folders, model_type):
    path, _ = folders(model_type)
    short, long = (llm.profile(path, llm.Decode(c)) for c in (64, 4096))
    states = sum(layer.state_bytes for layer in short.layers)
    assert states > 0
    if all(layer.kind == "state" for layer in short.layers):
        assert short.kv_cache_bytes == long.kv_cache_bytes == states
    else:   # attention layers beside: only they grow, by their positions
        grown = long.kv_cache_bytes - short.kv_cache_bytes
        assert grown == (4096 - 64) * short.kv_bytes_per_token


def test_generate_makes_as_many_forward_passes_as_transformers_generate(folders):
    path, model = folders("qwen3")
    calls = []
    handle = model.register_forward_pre_hook(lambda *_: calls.append(1))
    try:
        ids = torch.randint(0, 512, (1, 8))
        model.generate(ids, max_new_tokens=5, min_new_tokens=5, do_sample=False)
    finally:
        handle.remove()
    report = llm.profile(path, llm.Generate(prompt=8, new_tokens=5))
    assert len(calls) == 5 == 1 + len(report.decode.contexts)
    assert report.kv_cache_bytes == (8 + 4) * report.kv_bytes_per_token  # the last new token is not fed back


def test_sliding_layers_cap_at_the_window(folders):
    path, model = folders("gemma2")
    report = llm.profile(path, llm.Decode(CONTEXT))
    sliding, full = report.layers
    assert (sliding.kind, full.kind) == ("sliding", "full")
    # window 16: the sliding layer keeps 15 positions after the step, the global one all 65
    assert report.kv_cache_bytes == (15 + CONTEXT + 1) * _attention_per_token(model.config) * F32


@pytest.mark.parametrize("model_type", ["qwen3_moe", "deepseek_v3", "gpt_oss", "jamba"])
def test_a_plain_count_of_a_mixture_of_experts_is_the_prefills(folders, model_type):
    """The plain count (torch.export of one forward, no cache) and the traced prefill (the
    recorded run with the cache) of the same 128 tokens: two captures, one number."""
    import flopcount

    path, _ = folders(model_type)
    report = flopcount.profile(path)
    assert any("MoE routing: balanced" in note for note in report.notes)
    assert report.macs == llm.profile(path, llm.Prefill(128)).prefill.total.macs


def test_a_module_in_memory_counts_as_its_folder_and_is_left_as_it_was(folders):
    path, model = folders("qwen3")
    before = {name: t.clone() for name, t in model.state_dict().items()}
    in_memory = llm.profile(model, llm.Decode(CONTEXT))
    assert in_memory.decode.total.counts() == llm.profile(path, llm.Decode(CONTEXT)).decode.total.counts()
    assert any("counted on a copy built on the meta device" in note for note in in_memory.notes)
    after = model.state_dict()
    assert all(torch.equal(before[name], after[name]) for name in before) and not model.training


@pytest.mark.parametrize("model_type", ["deepseek_v2", "deepseek_v3"])
def test_latent_attention_caches_the_latent_and_the_rotary_key(folders, model_type):
    path, model = folders(model_type)
    cfg = model.config
    assert (cfg.kv_lora_rank, cfg.qk_rope_head_dim, cfg.num_hidden_layers) == (32, 16, 2)
    report = llm.profile(path, llm.Decode(CONTEXT))
    # (32 + 16) float32 values per layer per token, not 2 x 4 heads x (16 + 16) keys and values
    assert report.kv_bytes_per_token == 384 == 2 * (32 + 16) * F32
    assert report.decode.last.kv_cache_bytes == (CONTEXT + 1) * 384
