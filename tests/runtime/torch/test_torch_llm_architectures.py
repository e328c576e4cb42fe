"""Current decoder architectures no native builder covers, through the PyTorch path: tiny random
models that transformers builds from a config and saves (``save_pretrained``) are counted with
the plain API (on torch's meta device, from the folder), with every op priced (``strict``).

Their MACs are checked against PyTorch's FlopCounterMode on a real forward of the same saved
model over the same tokens, divided by 2, plus what it leaves out, by hand formula:

* attention: FlopCounterMode has no formula for the CPU kernel ``scaled_dot_product_attention``
  runs (``_scaled_dot_product_flash_attention_for_cpu``): B·H·L·L·(D + Dv) per attention layer;
* grouped expert GEMMs (transformers' MoE experts, the custom op ``grouped_mm_fallback``), which
  it counts 0: tokens·k·(hidden·2·inter + inter·hidden) per MoE layer (gate-up, then down);
* Qwen3-Next's chunked gated delta rule takes another branch while exporting: it builds the
  inverse of its triangular system by forward substitution and multiplies by it (two
  products of C x C by C x D per chunk, where the eager run calls ``solve_triangular``, which
  FlopCounterMode counts 0), and the last chunk's state update, which nothing reads without a
  cache, is left out of the graph (H·Dk·C·Dv).

MoE is switched off in the first set (DeepSeek-V2's ``first_k_dense_replace`` covering every
layer, Llama 4's empty ``moe_layers``, Qwen3-Next's ``mlp_only_layers`` covering every layer,
Jamba's ``num_experts=1``), so those check the rotary embedding (``polar``), the linear
attention (``eye``) and the Mamba layers alone; the second set turns MoE on (routing with
``topk``, ``sort``, ``histc``, ``scatter`` and grouped expert GEMMs).
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

import flopcount  # noqa: E402

try:
    from flopcount.runtime.torch.environment import import_transformers

    transformers = import_transformers()
except ImportError:
    pytest.skip("transformers is not installed", allow_module_level=True)

TOKENS = 16
SMALL = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, vocab_size=512,
             intermediate_size=128, pad_token_id=0, max_position_embeddings=256)

CONFIGS = {
    "deepseek_v2": dict(SMALL, num_key_value_heads=4, kv_lora_rank=16, q_lora_rank=32, qk_rope_head_dim=8,
                        qk_nope_head_dim=8, v_head_dim=16, first_k_dense_replace=2, moe_intermediate_size=32,
                        n_routed_experts=4, num_experts_per_tok=2),
    "llama4_text": dict(SMALL, head_dim=16, moe_layers=[], interleave_moe_layer_step=0, intermediate_size_mlp=128,
                        num_local_experts=2),
    "qwen3_next": dict(SMALL, head_dim=16, mlp_only_layers=[0, 1], layer_types=["linear_attention", "full_attention"],
                       linear_num_value_heads=4, linear_num_key_heads=2, linear_key_head_dim=16,
                       linear_value_head_dim=16, linear_conv_kernel_dim=4, num_experts=4, num_experts_per_tok=2,
                       moe_intermediate_size=32),
    "mamba": dict(hidden_size=64, num_hidden_layers=2, vocab_size=512, state_size=8, expand=2, conv_kernel=4,
                  pad_token_id=0),
    "jamba": dict(SMALL, num_experts=1, attn_layer_period=2, attn_layer_offset=1, expert_layer_period=1,
                  expert_layer_offset=0, mamba_d_state=8, mamba_d_conv=4, mamba_expand=2, mamba_dt_rank=8),
    "falcon_h1": dict(SMALL, head_dim=16, mamba_d_ssm=64, mamba_n_heads=4, mamba_d_head=16, mamba_n_groups=1,
                      mamba_d_state=8, mamba_d_conv=4, mamba_expand=2, mamba_chunk_size=16),
}
MOE_ON = {
    "deepseek_v2": dict(first_k_dense_replace=0),
    "llama4_text": dict(moe_layers=[0, 1], interleave_moe_layer_step=1),
    "jamba": dict(num_experts=4, num_experts_per_tok=2),
}

# (attention layers, heads, query/key dim, value dim)
ATTENTION = {"deepseek_v2": (2, 4, 8 + 8, 16), "llama4_text": (2, 4, 16, 16), "qwen3_next": (1, 4, 16, 16),
             "mamba": (0, 0, 0, 0), "jamba": (1, 4, 16, 16), "falcon_h1": (2, 4, 16, 16)}
# (MoE layers with grouped expert GEMMs, experts per token, hidden, expert intermediate size)
GROUPED = {"deepseek_v2": (2, 2, 64, 32), "llama4_text": (0, 0, 0, 0), "jamba": (2, 2, 64, 128)}


def _attention(name: str) -> int:
    layers, heads, qk, v = ATTENTION[name]
    return layers * heads * TOKENS * TOKENS * (qk + v)


def _grouped_experts(name: str) -> int:
    layers, k, hidden, inter = GROUPED[name]
    return layers * TOKENS * k * (hidden * 2 * inter + inter * hidden)


# (MoE layers transformers runs densely, experts, experts per token, hidden, expert intermediate
# size): Llama 4's block runs every expert on every token (scores zero the unchosen); flopcount
# routes each token to its k experts, as the model is deployed
DENSE = {"llama4_text": (2, 2, 1, 64, 128)}


def _unrouted_experts(name: str) -> int:
    layers, experts, k, hidden, inter = DENSE.get(name, (0, 1, 1, 0, 0))
    return layers * (experts - k) * TOKENS * 3 * hidden * inter


def _delta_rule_branch(name: str) -> int:
    if name != "qwen3_next":
        return 0
    heads, chunk, key_dim, value_dim = 4, 64, 16, 16   # one linear-attention layer, one chunk of 64
    return 2 * heads * chunk * chunk * value_dim - heads * key_dim * chunk * value_dim


def _save(name: str, settings: dict, path) -> str:
    config = transformers.AutoConfig.for_model(name, **settings)
    torch.manual_seed(0)
    transformers.AutoModelForCausalLM.from_config(config).save_pretrained(path)
    return str(path)


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    made = {name: _save(name, settings, tmp_path_factory.mktemp(name)) for name, settings in CONFIGS.items()}
    for name, extra in MOE_ON.items():
        made[f"{name}+moe"] = _save(name, {**CONFIGS[name], **extra}, tmp_path_factory.mktemp(f"{name}_moe"))
    return made


def _flop_counter_macs(folder: str) -> int:
    """FlopCounterMode's count of one forward of the saved model over TOKENS tokens, halved."""
    from torch.utils.flop_counter import FlopCounterMode

    model = transformers.AutoModelForCausalLM.from_pretrained(folder).eval()
    ids = torch.randint(1, 500, (1, TOKENS), generator=torch.Generator().manual_seed(0))
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(input_ids=ids, use_cache=False)
    return counter.get_total_flops() // 2


@pytest.mark.parametrize("name", list(CONFIGS) + [f"{name}+moe" for name in MOE_ON])
def test_counts_every_op_and_the_macs_torch_counts(name, folders):
    arch = name.partition("+")[0]
    report = flopcount.profile(folders[name], input_shape=(1, TOKENS), strict=True)   # strict: no op without a rule
    assert not report.unsupported
    grouped, dense = (_grouped_experts(arch), _unrouted_experts(arch)) if name.endswith("+moe") else (0, 0)
    expected = _flop_counter_macs(folders[name]) + _attention(arch) + grouped - dense + _delta_rule_branch(arch)
    assert report.macs == expected


def test_the_command_counts_a_folder_with_a_complex_rotary_embedding(folders):
    """``python -m flopcount FOLDER``: Llama 4's rotary embedding (polar, complex products)
    counts with no op left unpriced, as the API counts it."""
    from click.testing import CliRunner

    from flopcount.cli import main

    result = CliRunner().invoke(main, [folders["llama4_text"], "--format", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["unsupported"] == []
    assert data["totals"]["macs"] == flopcount.profile(folders["llama4_text"]).macs > 0
