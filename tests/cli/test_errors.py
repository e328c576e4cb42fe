"""Bad input: one clear line on stderr, exit code 2, no traceback, nothing on stdout."""

from __future__ import annotations

import os

import pytest

from conftest import assert_bad_input


def test_missing_file(run, tmp_path):
    for name in ("missing.onnx", "missing.safetensors", "sub/missing"):
        assert_bad_input(run(tmp_path / name), f"{tmp_path / name}: no such file")


def test_unknown_zoo_name_suggests_the_closest(run):
    assert_bad_input(run("resnet5"), "unknown model 'resnet5'", "did you mean resnet50")
    assert_bad_input(run("vit"), "unknown model 'vit'")


def test_truncated_empty_and_garbage_native_files(run, native_file, tmp_path):
    data = open(native_file, "rb").read()
    for name, payload in [("half.safetensors", data[: len(data) // 2]), ("head.safetensors", data[:20]),
                          ("empty.safetensors", b""), ("noise.bin", os.urandom(512))]:
        path = tmp_path / name
        path.write_bytes(payload)
        assert_bad_input(run(path), str(path))
    assert_bad_input(run(tmp_path), "is a directory")


def test_not_an_onnx_file(run, tmp_path):
    path = tmp_path / "model.onnx"
    path.write_bytes(b"this is not a protobuf at all" * 10)
    assert_bad_input(run(path), str(path))


def test_malformed_input_shapes(run):
    for text in ("1,3,a", "1x3x", "x=", "0x3x224x224"):
        assert_bad_input(run("resnet18", "--input-shape", text), f"--input-shape '{text}'")
    assert_bad_input(run("resnet18", "--dtype", "float33"), "--dtype 'float33'")
    assert_bad_input(run("resnet18", "--batch", 0), "--batch")


def test_mismatched_input_shapes_name_the_expected_one(run, native_file, factory_file):
    assert_bad_input(run("resnet18", "-i", "1x3x224"), "expects 4", "x=1x3x224x224")
    assert_bad_input(run("resnet18", "-i", "1x1x224x224"), "does not fit resnet18",
                     "its default input is x=1x3x224x224", "expects 3")
    assert_bad_input(run("resnet18", "-i", "image=1x3x224x224"), "no input 'image'", "x=1x3x224x224")
    assert_bad_input(run(native_file, "-i", "5x4"), "mlp.safetensors takes x=3x4", "got x=5x4")
    assert_bad_input(run(native_file, "--batch", 2), "takes x=3x4", "got x=2x4")
    assert_bad_input(run(f"{factory_file}:mlp", "-i", "3x5"), "does not fit nets.py:mlp", "linear")
    assert_bad_input(run(f"{factory_file}:pair", "-i", "image=2x4", "-i", "other=2x3"), "Pair.forward")


def test_factory_needs_an_input_shape(run, factory_file):
    assert_bad_input(run(f"{factory_file}:mlp"), "nets.py:mlp has no default input", "--input-shape")


@pytest.mark.skipif(__import__("flopcount.runtime", fromlist=["cuda"]).cuda.is_available(),
                    reason="a GPU is available here")
def test_cuda_without_cupy_or_gpu_says_how_to_install(run):
    assert_bad_input(run("resnet18", "--device", "cuda"), "pip install 'flopcount[cuda12]'")
    assert_bad_input(run("resnet18", "--device", "gpu"), "'gpu' is not cpu, cuda or cuda:N")


def test_user_code_errors(run, factory_file, tmp_path):
    assert_bad_input(run(f"{factory_file}:broken", "-i", "3,4"),
                     "nets.py:broken raised ValueError: the weights are missing")
    assert_bad_input(run(f"{factory_file}:not_a_module", "-i", "3,4"),
                     "returned int, not a flopcount.runtime.nn.Module")
    assert_bad_input(run(f"{factory_file}:missing", "-i", "3,4"), "has no function 'missing'", "it defines", "mlp")
    assert_bad_input(run(factory_file, "-i", "3,4"), "name the function that builds the model")
    bad = tmp_path / "syntax.py"
    bad.write_text("def make(:\n")
    assert_bad_input(run(f"{bad}:make", "-i", "3,4"), "running the file failed: SyntaxError")
    exits = tmp_path / "exits.py"
    exits.write_text("import sys\nsys.exit(3)\n")
    assert_bad_input(run(f"{exits}:make", "-i", "3,4"), "running the file failed: SystemExit")


def test_options_that_do_not_apply(run, native_file):
    assert_bad_input(run("resnet18", "--factory-arg", "width=3"), "--factory-arg applies to file.py:factory")
    assert_bad_input(run(native_file, "--mode", "eager"), "--mode eager", "is a graph")
    assert_bad_input(run("resnet18", "--repeat", 3), "add --latency")
    assert_bad_input(run("resnet18", "--format", "xml"), "'xml' is not one of")
    assert_bad_input(run("resnet18", "--dept", 1), "No such option", "--depth")
    assert_bad_input(run("profile"), "Missing argument 'MODEL'")


def test_unwritable_output_fails_before_any_work(run, tmp_path):
    assert_bad_input(run("resnet18", "-o", tmp_path / "nowhere" / "r.json"), "does not exist")
    assert_bad_input(run("resnet18", "-o", tmp_path), "is a directory")


def test_a_bug_is_one_line_with_exit_code_one(run, tmp_path):
    crash = tmp_path / "crash.py"
    crash.write_text("import flopcount.runtime as rt\n"
                     "class Net(rt.nn.Module):\n"
                     "    def forward(self, x):\n"
                     "        return {}['missing']\n"
                     "def make():\n"
                     "    return Net()\n")
    result = run(f"{crash}:make", "-i", "2", "--mode", "eager")
    assert result.exit_code == 1
    assert result.stderr.count("\n") == 1 and "KeyError" in result.stderr and "--debug" in result.stderr
