"""One loader for profile() and the command line: what a model spec names, ONNX symbolic dims
bound from the shapes given, native files fixed to their shapes, factories with arguments."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

import flopcount
import flopcount.runtime as rt
from flopcount import loading, models
from flopcount.cli import main

nn = rt.nn


def _mlp_onnx(path, x_dims=("batch", 4)) -> str:
    """x [batch, 4] @ W (4, 3), then Relu: batch·4·3 MACs."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.ones((4, 3), np.float32), "W")
    nodes = [helper.make_node("MatMul", ["x", "W"], ["h"], name="/fc/MatMul"),
             helper.make_node("Relu", ["h"], ["y"], name="/act/Relu")]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_dims))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])], initializer=[w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return str(path)


class Pair(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(4, 2), nn.Linear(3, 2)

    def forward(self, image, extra):
        return self.a(image) + self.b(extra)


def test_kinds_of_spec():
    assert [loading.kind_of(s) for s in ("net.py:make", "net.py", "m.ONNX", "resnet18", "./resnet18",
                                         "weights.safetensors", "noext", "zoo:resnet18")] == [
        loading.FACTORY, loading.FACTORY, loading.ONNX, loading.ZOO, loading.NATIVE, loading.NATIVE, loading.ZOO,
        loading.ZOO]


def test_an_existing_path_wins_over_a_zoo_name_and_says_so_in_api_and_cli(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rt.save(nn.Linear(4, 2), "resnet18", example_inputs=(rt.randn(3, 4),))
    for spec in ("resnet18", "./resnet18"):
        report = flopcount.profile(spec)
        assert report.macs == 3 * 4 * 2
    assert "'resnet18' is the file ./resnet18, not the zoo model of that name; write zoo:resnet18" \
        in flopcount.profile("resnet18").notes[-1]
    assert not any("zoo" in n for n in flopcount.profile("./resnet18").notes)   # no collision, no note
    assert flopcount.profile("zoo:resnet18", device="meta").macs == 1_814_073_344
    from click.testing import CliRunner

    result = CliRunner().invoke(main, ["resnet18", "--format", "json"])
    assert json.loads(result.stdout)["totals"]["macs"] == 3 * 4 * 2
    result = CliRunner().invoke(main, ["zoo:resnet18", "--format", "json"])
    assert json.loads(result.stdout)["totals"]["macs"] == 1_814_073_344


def test_a_hugging_face_folder_named_like_a_zoo_model_is_the_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    os.mkdir("llama")
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 256, "hidden_size": 64,
              "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
              "max_position_embeddings": 128, "rms_norm_eps": 1e-5, "tie_word_embeddings": False}
    with open(os.path.join("llama", "config.json"), "w") as f:
        json.dump(config, f)
    # by hand: embeddings and head 256·64 each; per layer q, o 64·64, k, v 64·32, gate, up, down
    # 64·128, two norms of 64; a final norm of 64
    per_layer = 2 * 64 * 64 + 2 * 64 * 32 + 3 * 64 * 128 + 2 * 64
    want = 2 * 256 * 64 + 2 * per_layer + 64
    folder = flopcount.profile("llama", device="meta")
    assert folder.root.params == want
    assert "write zoo:llama for the zoo model" in folder.notes[-1] and "folder ./llama" in folder.notes[-1]
    assert flopcount.profile("zoo:llama", device="meta").root.params == models.info("llama").params


def test_onnx_symbolic_dims_from_input_shape_or_the_inputs(tmp_path):
    path = _mlp_onnx(tmp_path / "mlp.onnx")
    assert flopcount.profile(path, input_shape=(5, 4)).macs == 5 * 4 * 3
    assert flopcount.profile(path, input_shape={"x": (2, 4)}).macs == 2 * 4 * 3
    assert flopcount.profile(path, rt.randn(7, 4)).macs == 7 * 4 * 3
    assert flopcount.profile(path, x=rt.randn(6, 4)).macs == 6 * 4 * 3
    with pytest.raises(flopcount.ShapeError, match=r"mlp.onnx: input 'x' has symbolic dims \['batch'\].*"
                                                   r"the file's inputs are x \[batch, 4\]; give their shapes, "
                                                   r"e.g. input_shape=\{'x': \(1, 4\)\}"):
        flopcount.profile(path)
    with pytest.raises(flopcount.ShapeError, match=r"mlp takes x=5x4 .*; got x=5x3"):
        flopcount.profile(rt.onnx.load(path, [(5, 4)]), input_shape=(5, 3))


def test_onnx_inputs_lists_declared_dims(tmp_path):
    path = _mlp_onnx(tmp_path / "mlp.onnx", x_dims=("batch", None, 4))
    [declared] = rt.onnx.inputs(path)
    assert (declared.name, declared.dims, declared.dtype) == ("x", ["batch", None, 4], rt.float32)
    bert = os.path.join(os.path.dirname(__file__), "data", "onnx", "bert_torchscript_op17.onnx")
    assert [(i.name, i.dims, i.dtype) for i in rt.onnx.inputs(bert)] == [("input_ids", ["batch", "sequence"],
                                                                         rt.int64)]


def test_native_files_are_fixed_to_their_shapes(tmp_path):
    path = str(tmp_path / "lin.safetensors")
    rt.save(nn.Linear(4, 2), path, example_inputs=(rt.randn(3, 4),))
    assert flopcount.profile(path).input_shapes == [(3, 4)]
    with pytest.raises(flopcount.ShapeError, match=r"lin.safetensors takes x=3x4 .*; got x=5x4"):
        flopcount.profile(path, input_shape=(5, 4))


def test_factories_take_arguments_and_fail_in_one_error(tmp_path):
    source = tmp_path / "nets.py"
    source.write_text("import flopcount.runtime as rt\n"
                      "def make(width=2):\n    return rt.nn.Linear(4, width)\n"
                      "def broken():\n    raise ValueError('no weights')\n")
    assert flopcount.profile(f"{source}:make", input_shape=(3, 4), factory_args={"width": 5}).macs == 3 * 4 * 5
    with pytest.raises(flopcount.ModelFileError, match="nets.py:broken raised ValueError: no weights"):
        flopcount.profile(f"{source}:broken", input_shape=(3, 4))
    with pytest.raises(flopcount.FlopcountError, match="factory_args apply to 'file.py:factory' models"):
        flopcount.profile(nn.Linear(4, 2), rt.randn(1, 4), factory_args={"width": 5})


def test_named_inputs_are_bound_to_forward_in_both_views():
    x, e = rt.randn(2, 4), rt.randn(2, 3)
    for mode in ("graph", "eager"):
        by_name = flopcount.profile(Pair(), extra=e, image=x, mode=mode)
        assert by_name.macs == flopcount.profile(Pair(), x, e, mode=mode).macs == 2 * (4 * 2 + 3 * 2)
        assert by_name.input_shapes == [(2, 4), (2, 3)]  # bound in forward's order
    with pytest.raises(flopcount.ShapeError, match=r"Pair.forward\(image, extra\).*'picture'"):
        flopcount.profile(Pair(), x, picture=e)
    with pytest.raises(flopcount.ShapeError, match="missing a required argument: 'extra'"):
        flopcount.profile(Pair(), x)
    with pytest.raises(flopcount.ShapeError, match="too many positional arguments"):
        flopcount.profile(Pair(), x, e, e)


def test_named_inputs_of_a_graph():
    graph = rt.trace(Pair(), rt.randn(2, 4), rt.randn(2, 3))
    assert flopcount.profile(graph, extra=rt.randn(2, 3), image=rt.randn(2, 4)).macs == 2 * (4 * 2 + 3 * 2)
    with pytest.raises(flopcount.ShapeError, match="has no input 'picture'; its inputs are image, extra"):
        flopcount.profile(graph, rt.randn(2, 4), picture=rt.randn(2, 3))
    with pytest.raises(flopcount.ShapeError, match="missing extra"):
        flopcount.profile(graph, rt.randn(2, 4))
    with pytest.raises(flopcount.ShapeError, match="takes 2 input"):
        flopcount.profile(graph, rt.randn(2, 4), rt.randn(2, 3), rt.randn(1))


def test_cli_and_api_give_the_same_numbers(tmp_path):
    path = _mlp_onnx(tmp_path / "mlp.onnx")
    from click.testing import CliRunner

    result = CliRunner().invoke(main, [path, "-i", "x=3x4", "--format", "json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["totals"]["macs"] == flopcount.profile(path, input_shape={"x": (3, 4)}).macs


def test_a_file_saved_without_weights_is_counted_on_meta(tmp_path):
    path = str(tmp_path / "shapes_only.safetensors")
    with rt.meta():
        net = nn.Linear(4, 2)
    rt.save(net, path, example_inputs=(rt.empty(3, 4, device="meta"),))
    report = flopcount.profile(path)
    assert (report.macs, report.device) == (3 * 4 * 2, "meta")
    from click.testing import CliRunner

    result = CliRunner().invoke(main, [path, "--format", "json"])
    assert result.exit_code == 0
    assert "saved without weights: counted on the meta device" in result.stderr


def test_a_file_format_is_its_entry_alone(tmp_path, monkeypatch):
    # how a frontend for a new file format plugs in: one FileFormat, nothing else changed
    from flopcount import file_formats
    from flopcount.inputs import InputSpec
    from flopcount.target import Target

    def load_toy(path, device, zoo_device=None):
        model = rt.nn.Linear(4, 2)
        return Target(model, os.path.basename(path), "toy", [InputSpec("x", (3, 4), "float32")], path=path)

    toy = file_formats.FileFormat("toy", "a toy file", ".toy", "it does not start with 'TOY1'",
                                  lambda path: open(path, "rb").read(4) == b"TOY1", load_toy)
    monkeypatch.setattr(file_formats, "FORMATS", file_formats.FORMATS + (toy,))
    named_otherwise = tmp_path / "model.bin"
    named_otherwise.write_bytes(b"TOY1" + bytes(16))
    report = flopcount.profile(str(named_otherwise))
    assert report.macs == 3 * 4 * 2 and report.params == 4 * 2 + 2
    assert loading.load(str(named_otherwise)).kind == "toy"
    impostor = tmp_path / "model.toy"
    impostor.write_bytes(b"ONNX" + bytes(16))
    with pytest.raises(flopcount.ModelFileError, match=r"model\.toy: not a toy file \(it does not start with 'TOY1'\)$"):
        flopcount.profile(str(impostor))
