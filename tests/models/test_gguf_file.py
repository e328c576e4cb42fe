"""GGUF files: the decoder of the file's architecture, every tensor at its true size.

The files are written by llama.cpp's ``gguf`` package (``gguf_files.py``); the counts are checked
against the file's own tensor table (read by the package's reader), the same model as a Hugging
Face folder, and the formulas of a decoder; a run against transformers on the weights the file
decodes to."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

import flopcount
from flopcount import llm
from flopcount.runtime import get_dtype

import gguf_files as files
from gguf_files import FF, HEAD_DIM, HEADS, HIDDEN, KV_HEADS, LAYERS, Q, VOCAB, gguf

MIXED = {"embed": Q.Q4_K, "attn": Q.Q4_K, "attn_v": Q.Q6_K, "ffn": Q.Q4_K, "ffn_down": Q.Q6_K, "output": Q.Q6_K}
QWEN = {"embed": Q.Q8_0, "attn": Q.Q5_K, "attn_v": Q.Q5_K, "ffn": Q.IQ4_XS, "ffn_down": Q.Q2_K}


@pytest.fixture(scope="module")
def llama_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("gguf") / "llama-mixed.gguf"
    files.write(path, "llama", MIXED)
    return str(path)


@pytest.fixture(scope="module")
def qwen_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("gguf") / "qwen2-tied.gguf"
    files.write(path, "qwen2", QWEN, tied=True)
    return str(path)


def _table(path) -> list:
    return gguf.GGUFReader(path).tensors


def test_bits_per_weight_are_llama_cpps():
    # llama.cpp's figures for its formats, scales and mins included
    published = {"q4_0": 4.5, "q8_0": 8.5, "q2_k": 2.625, "q4_k": 4.5, "q5_k": 5.5, "q6_k": 6.5625,
                 "iq4_xs": 4.25, "mxfp4": 4.25}
    from flopcount.runtime.gguf import dtype_of

    for name, bits in published.items():
        assert dtype_of(Q[name.upper()]).bits == bits
        assert get_dtype(name).nbytes(4096 * 4096) == 4096 * 4096 * bits / 8


@pytest.mark.parametrize("which", ["llama_file", "qwen_file"])
def test_parameters_and_bytes_are_the_tensor_table(which, request):
    path = request.getfixturevalue(which)
    report = flopcount.profile(path)
    table = _table(path)
    assert report.totals["params"] == sum(int(t.n_elements) for t in table)
    by_type: dict = {}
    for t in table:
        name = t.tensor_type.name.lower().replace("f32", "float32")
        by_type[name] = by_type.get(name, 0) + int(t.n_bytes)
    assert report.memory.parameters == by_type


@pytest.mark.parametrize("arch, which, tied", [("llama", "llama_file", False), ("qwen2", "qwen_file", True),
                                               ("gemma", None, True)])
def test_macs_are_the_hugging_face_folders(arch, which, tied, request, tmp_path):
    folder = tmp_path / arch
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(files.hf_config(arch, tied)))
    if which is None:
        files.write(tmp_path / f"{arch}.gguf", arch, {"attn": Q.Q4_K, "ffn": Q.Q8_0}, tied=tied)
    from_file = flopcount.profile(request.getfixturevalue(which) if which else str(tmp_path / f"{arch}.gguf"))
    from_folder = flopcount.profile(str(folder))
    assert from_file.totals["macs"] == from_folder.totals["macs"]
    tokens = 128
    linear = LAYERS * (HIDDEN * (HEADS + 2 * KV_HEADS) * HEAD_DIM + HEADS * HEAD_DIM * HIDDEN + 3 * HIDDEN * FF) \
        + HIDDEN * VOCAB
    attention = LAYERS * 2 * HEADS * tokens * HEAD_DIM   # scores and their sum over values, per query
    assert from_file.totals["macs"] == tokens * (linear + attention)


@pytest.mark.parametrize("which, tied", [("llama_file", False), ("qwen_file", True)])
def test_decode_reads_the_quantized_sizes(which, tied, request):
    path = request.getfixturevalue(which)
    table = {t.name: t for t in _table(path)}
    embed = table["token_embd.weight"]
    row = int(embed.n_bytes) // VOCAB
    batch = 2
    # a decode step reads every tensor whole once, but the token table: one row per sequence
    # (unless it is also the output layer, which reads it whole)
    whole = sum(int(t.n_bytes) for name, t in table.items() if name != "token_embd.weight" or tied)
    step = llm.profile(path, llm.Decode(context=16), batch=batch).decode.last
    assert sum(op.weight_read for op in step.ops) == whole + batch * row


def test_runs_as_transformers_does_on_the_decoded_weights(tmp_path):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    path = tmp_path / "llama-q8.gguf"
    decoded = files.write(path, "llama", {"embed": Q.Q4_0, "attn": Q.Q8_0, "attn_v": Q.Q8_0, "ffn": Q.Q8_0,
                                          "ffn_down": Q.Q8_0, "output": Q.Q8_0}, seed=0)
    config = transformers.LlamaConfig(**{k: v for k, v in files.hf_config().items() if k != "architectures"})
    reference = transformers.LlamaForCausalLM(config).eval()
    reference.load_state_dict({k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in decoded.items()},
                              strict=False)
    ids = np.random.default_rng(1).integers(0, VOCAB, (1, 12))
    with torch.no_grad():
        expected = reference(torch.from_numpy(ids)).logits.numpy()
    from flopcount import loading
    import flopcount.runtime as rt

    model = loading.load(str(path), "cpu").model
    got = model(rt.tensor(ids)).numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def test_the_format_is_read_from_the_content(llama_file, tmp_path):
    renamed = tmp_path / "weights.bin"
    renamed.write_bytes(open(llama_file, "rb").read())
    assert flopcount.profile(str(renamed)).totals["macs"] == flopcount.profile(llama_file).totals["macs"]


def test_bad_files_are_one_line(llama_file, tmp_path):
    data = open(llama_file, "rb").read()
    cases = {"cut.gguf": data[:300], "magic.gguf": b"GGUF\x03\x00\x00\x00", "noise.gguf": b"\x00" * 64}
    for name, payload in cases.items():
        (tmp_path / name).write_bytes(payload)
        done = subprocess.run([sys.executable, "-m", "flopcount", str(tmp_path / name)], capture_output=True,
                              text=True)
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2 and len(lines) == 1 and str(tmp_path / name) in lines[0], done.stderr
        assert "Traceback" not in done.stderr and not done.stdout


def test_an_architecture_not_read_is_named(tmp_path):
    path = tmp_path / "falcon.gguf"
    w = gguf.GGUFWriter(str(path), "falcon")
    w.add_tensor("token_embd.weight", np.zeros((8, 8), np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with pytest.raises(flopcount.FlopcountError, match="GGUF architecture 'falcon' is not read yet"):
        flopcount.profile(str(path))


def test_every_llm_phase_on_the_command_line(llama_file):
    def flopcount_cli(*args):
        done = subprocess.run([sys.executable, "-m", "flopcount", llama_file, *args], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert "quantized_linear" in flopcount_cli("--generate", "32:8", "--hardware", "a100-40gb")
    assert "weights q4_k+q6_k+float32 934.4 KB" in flopcount_cli("--fit", "--hardware", "a100-40gb")
