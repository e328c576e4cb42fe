"""A Hugging Face folder that only transformers builds (Qwen3), counted by ``python -m flopcount``
in a fresh interpreter: the command imports transformers through its own torchvision remedy,
not through tests/conftest.py's, so this is what a user's first run does."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _tiny_qwen3(folder) -> int:
    """A two-layer Qwen3ForCausalLM saved with save_pretrained; its parameter count."""
    config = transformers.Qwen3Config(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, head_dim=8,
                                      max_position_embeddings=64, tie_word_embeddings=False)
    torch.manual_seed(0)
    model = transformers.Qwen3ForCausalLM(config)
    model.save_pretrained(folder)
    return sum(p.numel() for p in model.parameters())


def test_a_qwen3_folder_counts_in_a_fresh_interpreter(tmp_path):
    folder = tmp_path / "qwen3-tiny"
    params = _tiny_qwen3(folder)
    # a clean environment: the worktree on the path and nothing else this test process prepared
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "PYTHON"))}
    env["PYTHONPATH"] = REPO
    proc = subprocess.run([sys.executable, "-m", "flopcount", str(folder), "-i", "input_ids=1x16", "--format", "json"],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    totals = json.loads(proc.stdout)["totals"]
    assert totals["params"] == params
    # by hand, 16 tokens: per layer q 32->32, k and v 32->16, o 32->32, gate and up 32->64, down
    # 64->32; lm_head 32->128; attention QK^T and AV, 4 heads of 16x16x8 each (norms, rotary and
    # SiLU are FLOPs, not MACs)
    per_token = 2 * (32 * 32 + 2 * 32 * 16 + 32 * 32 + 3 * 32 * 64) + 32 * 128
    attention = 2 * 2 * 4 * 16 * 16 * 8
    assert totals["macs"] == 16 * per_token + attention
