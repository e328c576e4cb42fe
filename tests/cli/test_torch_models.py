"""The command line on PyTorch models: FILE.py:FACTORY returning a torch.nn.Module, .pt2
archives, and pickled checkpoints (.pt, .pth, .bin) refused by content, never unpickled."""

from __future__ import annotations

import json
import pickle
import textwrap

import pytest

from conftest import assert_bad_input

TORCH_FACTORY = textwrap.dedent('''
    import torch


    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 4, 3)
            self.fc = torch.nn.Linear(4, 2)

        def forward(self, x):
            return self.fc(self.conv(x).relu().mean((2, 3)))


    class Tagger(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(50, 6)
            self.head = torch.nn.Linear(6, 3)

        def forward(self, input_ids):
            return self.head(self.embed(input_ids))


    def net():
        return Net()


    def tagger():
        return Tagger()
''')


class Sneaky:
    """Unpickling this writes a file: the checks below prove flopcount never unpickles."""

    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


@pytest.fixture(scope="module")
def torch_factory(tmp_path_factory) -> str:
    pytest.importorskip("torch")
    path = tmp_path_factory.mktemp("torch_factory") / "torch_nets.py"
    path.write_text(TORCH_FACTORY)
    return str(path)


def test_a_factory_returning_a_torch_module(run, torch_factory):
    result = run(f"{torch_factory}:net", "-i", "2x3x10x10", "--format", "json")
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["totals"]["macs"] == 2 * 4 * 8 * 8 * 27 + 2 * 4 * 2
    rows = {r["name"]: r["type"] for r in report["rows"] if r["kind"] != "op"}
    assert rows["conv"] == "Conv2d" and rows["fc"] == "Linear"


def test_a_torch_factory_takes_dtypes_and_needs_a_shape(run, torch_factory):
    result = run(f"{torch_factory}:tagger", "-i", "input_ids=2x7", "--dtype", "int64", "--format", "json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["totals"]["macs"] == 2 * 7 * 6 * 3
    assert_bad_input(run(f"{torch_factory}:net"), "has no default input", "--input-shape")


def test_a_pt2_archive(run, tmp_path):
    torch = pytest.importorskip("torch")
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2)).eval()
    path = tmp_path / "mlp.pt2"
    torch.export.save(torch.export.export(model, (torch.randn(3, 4),)), str(path))
    result = run(path, "--format", "json")
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["totals"]["macs"] == 3 * (4 * 8 + 8 * 2) and report["input_shapes"] == [[3, 4]]


@pytest.mark.parametrize("suffix", [".pt", ".pth", ".bin", ".ckpt", ""])
def test_raw_pickles_are_refused_by_content_and_never_unpickled(run, tmp_path, suffix):
    marker = tmp_path / "unpickled"
    path = tmp_path / f"checkpoint{suffix}"
    path.write_bytes(pickle.dumps({"state": Sneaky(str(marker))}, protocol=4))
    result = run(path)
    assert_bad_input(result, f"{path}: a pickle; flopcount never unpickles a file (unpickling can run code)",
                     "pass the module", ".pt2", "ONNX or safetensors")
    assert not marker.exists()


@pytest.mark.parametrize("legacy", [False, True])
def test_torch_save_checkpoints_are_refused(run, tmp_path, legacy):
    torch = pytest.importorskip("torch")
    path = tmp_path / "resnet.pth"
    torch.save({"fc.weight": torch.zeros(2, 2)}, str(path), _use_new_zipfile_serialization=not legacy)
    what = "a pickle" if legacy else "a PyTorch checkpoint written by torch.save (a pickle)"
    assert_bad_input(run(path), f"{path}: {what}; flopcount never unpickles a file")


def test_the_api_refuses_the_same_way(tmp_path):
    import flopcount
    from flopcount.runtime.errors import ModelFileError

    marker = tmp_path / "unpickled"
    path = tmp_path / "model.bin"
    path.write_bytes(pickle.dumps(Sneaky(str(marker)), protocol=2))
    with pytest.raises(ModelFileError, match=r"model\.bin: a pickle; flopcount never unpickles"):
        flopcount.profile(str(path))
    assert not marker.exists()


def test_a_hugging_face_folder(run, tmp_path):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.BertConfig(num_hidden_layers=2, hidden_size=32, num_attention_heads=4,
                                     intermediate_size=64, vocab_size=100)
    folder = tmp_path / "tiny-bert"
    transformers.BertForMaskedLM(config).save_pretrained(str(folder))
    result = run(folder, "--format", "json")
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["device"] == "meta" and report["input_shapes"] == [[1, 128]]
    longer = json.loads(run(folder, "-i", "input_ids=1x256", "--format", "json").stdout)
    assert longer["input_shapes"] == [[1, 256]] and longer["totals"]["params"] == report["totals"]["params"]
    timed = run(folder, "--latency", "--repeat", "1", "--format", "json")
    assert timed.exit_code == 0, timed.stderr
    assert json.loads(timed.stdout)["device"] == "cpu"
    assert_bad_input(run(tmp_path), "is a directory", "config.json")


def test_engine_torch_on_the_command_line(run, torch_factory):
    result = run(f"{torch_factory}:net", "-i", "1x3x10x10", "--engine", "torch", "--repeat", "2", "--format", "json")
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["engine"] == "torch" and report["totals"]["latency_ms"] > 0
    rows = {r["name"]: r for r in report["rows"]}
    assert rows["conv"]["latency_ms"] > 0 and rows["fc"]["latency_ms"] > 0
    assert_bad_input(run("resnet18", "--engine", "torch"), "engine 'torch' times a PyTorch model")
