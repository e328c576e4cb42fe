"""Small GGUF files written with llama.cpp's own ``gguf`` package, as its converter lays them
out: llama.cpp's tensor names, ggml's shapes, each tensor in the quantized type asked for.

``write(path, arch, types)`` writes one; ``HF_NAMES`` gives each tensor's Hugging Face name, so a
test can build the same model as a folder (``hf_tensors``: the file's weights dequantized)."""

from __future__ import annotations

import numpy as np

gguf = __import__("pytest").importorskip("gguf")
Q = gguf.GGMLQuantizationType

# a llama-style decoder small enough to run, wide enough for 256-weight blocks (K-quants)
HIDDEN, LAYERS, HEADS, KV_HEADS, FF, VOCAB = 256, 2, 4, 2, 512, 512
HEAD_DIM = HIDDEN // HEADS


def tensor_table(arch: str = "llama", tied: bool = False) -> list:
    """(GGUF name, Hugging Face name, shape in PyTorch's order, role) of every tensor."""
    rows = [("token_embd.weight", "model.embed_tokens.weight", (VOCAB, HIDDEN), "embed")]
    for i in range(LAYERS):
        block, layer = f"blk.{i}", f"model.layers.{i}"
        rows += [(f"{block}.attn_norm.weight", f"{layer}.input_layernorm.weight", (HIDDEN,), "norm"),
                 (f"{block}.attn_q.weight", f"{layer}.self_attn.q_proj.weight", (HEADS * HEAD_DIM, HIDDEN), "attn"),
                 (f"{block}.attn_k.weight", f"{layer}.self_attn.k_proj.weight", (KV_HEADS * HEAD_DIM, HIDDEN), "attn"),
                 (f"{block}.attn_v.weight", f"{layer}.self_attn.v_proj.weight", (KV_HEADS * HEAD_DIM, HIDDEN),
                  "attn_v"),
                 (f"{block}.attn_output.weight", f"{layer}.self_attn.o_proj.weight", (HIDDEN, HEADS * HEAD_DIM),
                  "attn"),
                 (f"{block}.ffn_norm.weight", f"{layer}.post_attention_layernorm.weight", (HIDDEN,), "norm"),
                 (f"{block}.ffn_gate.weight", f"{layer}.mlp.gate_proj.weight", (FF, HIDDEN), "ffn"),
                 (f"{block}.ffn_up.weight", f"{layer}.mlp.up_proj.weight", (FF, HIDDEN), "ffn"),
                 (f"{block}.ffn_down.weight", f"{layer}.mlp.down_proj.weight", (HIDDEN, FF), "ffn_down")]
        if arch == "qwen2":
            rows += [(f"{block}.attn_{n}.bias", f"{layer}.self_attn.{n}_proj.bias", (d,), "norm")
                     for n, d in (("q", HEADS * HEAD_DIM), ("k", KV_HEADS * HEAD_DIM), ("v", KV_HEADS * HEAD_DIM))]
    rows.append(("output_norm.weight", "model.norm.weight", (HIDDEN,), "norm"))
    if not tied:
        rows.append(("output.weight", "lm_head.weight", (VOCAB, HIDDEN), "output"))
    return rows


def write(path, arch: str = "llama", types: dict | None = None, tied: bool = False, seed: int | None = None) -> dict:
    """Write the file; ``types`` {role: GGMLQuantizationType} (F32 where not given). With
    ``seed``, random weights quantized by the package (types it can quantize), else zero blocks.
    Returns {Hugging Face name: the float weight the file's tensor decodes to}."""
    types = types or {}
    rng = np.random.default_rng(seed)
    w = gguf.GGUFWriter(str(path), arch)
    w.add_block_count(LAYERS)
    w.add_context_length(2048)
    w.add_embedding_length(HIDDEN)
    w.add_feed_forward_length(FF)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(10000.0)
    decoded = {}
    for name, hf_name, shape, role in tensor_table(arch, tied):
        qtype = types.get(role, Q.F32)
        values = (rng.standard_normal(shape) * 0.05).astype(np.float32) if seed is not None else \
            np.zeros(shape, np.float32)
        if role == "norm" and seed is not None:
            values = 1 + values
        if qtype in (Q.F32, Q.F16):
            stored = values.astype(np.float32 if qtype == Q.F32 else np.float16)
            w.add_tensor(name, stored)
            decoded[hf_name] = stored.astype(np.float32)
        else:
            block, block_bytes = gguf.GGML_QUANT_SIZES[qtype]
            raw = gguf.quants.quantize(values, qtype) if seed is not None else \
                np.zeros(shape[:-1] + (shape[-1] // block * block_bytes,), np.uint8)
            w.add_tensor(name, raw, raw_dtype=qtype)
            decoded[hf_name] = gguf.quants.dequantize(raw, qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return decoded


def hf_config(arch: str = "llama", tied: bool = False) -> dict:
    """The config.json a Hugging Face folder of the same model has."""
    name = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM", "gemma": "GemmaForCausalLM"}[arch]
    return {"architectures": [name], "model_type": arch, "hidden_size": HIDDEN, "num_hidden_layers": LAYERS,
            "intermediate_size": FF, "num_attention_heads": HEADS, "num_key_value_heads": KV_HEADS,
            "head_dim": HEAD_DIM, "max_position_embeddings": 2048, "rms_norm_eps": 1e-5, "vocab_size": VOCAB, "rope_theta": 10000.0,
            "tie_word_embeddings": tied, "hidden_act": "silu", "torch_dtype": "float32"}
