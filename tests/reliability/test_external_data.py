"""External data is read from the model's own folder only, for every tensor of the file (an
initializer, a Constant's value, a tensor in a subgraph): a model cannot make flopcount read a
file elsewhere, such as one in the directory the user runs it from.

"Never opened" is checked with FIFOs: opening one for reading blocks until a writer comes, so a
run that opened the decoy would hang and hit the subprocess timeout instead of exiting."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import flopcount.runtime as rt  # noqa: E402
from flopcount.runtime.onnx.converters import CONVERTERS  # noqa: E402

# where If has a converter the subgraph case reads its data too; before, the file is refused
# for the If (still without opening anything)
PLACES = ["constant", "initializer"] + [pytest.param("subgraph", marks=pytest.mark.skipif(
    "If" not in CONVERTERS, reason="If has no ONNX converter in this build"))]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _external(tensor: TensorProto, location: str, length: int) -> TensorProto:
    tensor.ClearField("raw_data")
    tensor.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", "0"), ("length", str(length))):
        entry = tensor.external_data.add()
        entry.key, entry.value = key, value
    return tensor


def _reshape_model(location: str, where: str) -> onnx.ModelProto:
    """Reshape(x, target) where ``target`` (int64 [2]) is stored externally at ``location`` as
    a Constant's value (``where="constant"``), an initializer, or a Constant inside an If."""
    target = _external(numpy_helper.from_array(np.array([3, 2], np.int64), "target"), location, 16)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 2])
    inits, nodes = [], []
    if where == "initializer":
        inits.append(target)
    elif where == "constant":
        nodes.append(helper.make_node("Constant", [], ["target"], value=target))
    else:
        branch_out = helper.make_tensor_value_info("target_b", TensorProto.INT64, [2])
        branch = helper.make_graph([helper.make_node("Constant", [], ["target_b"], value=target)], "b", [], [branch_out])
        flag = numpy_helper.from_array(np.array(True), "flag")
        inits.append(flag)
        nodes.append(helper.make_node("If", ["flag"], ["target"], then_branch=branch, else_branch=branch))
    nodes.append(helper.make_node("Reshape", ["x", "target"], ["y"]))
    graph = helper.make_graph(nodes, "g", [x], [y], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _run_cli(model_path: str, cwd: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "flopcount", model_path], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=180)


@pytest.mark.parametrize("where", ["constant", "initializer", "subgraph"])
def test_external_data_outside_the_model_folder_is_never_opened(tmp_path, where):
    work = tmp_path / "work"               # where the user runs flopcount
    models = work / "models"
    models.mkdir(parents=True)
    os.mkfifo(work / "secret.bin")          # in the working directory: the old lookup place
    os.mkfifo(tmp_path / "outside.bin")     # beside the working directory
    os.symlink(tmp_path / "outside.bin", models / "link.bin")
    cases = {"secret.bin": "secret.bin",                        # missing in the model folder
             "../secret.bin": "../secret.bin",                   # climbs out
             "abs": str(tmp_path / "outside.bin"),               # absolute
             "link": "link.bin"}                                  # a symlink that leads out
    for label, location in cases.items():
        path = models / f"{label.replace('/', '_')}.onnx"
        onnx.save_model(_reshape_model(location, where), path)
        done = _run_cli(str(path), str(work))
        assert done.returncode == 2, (label, done.returncode, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in done.stderr, (label, done.stderr)
        assert str(path) in lines[0], lines[0]
        assert where == "subgraph" or "target" in lines[0], lines[0]


@pytest.mark.parametrize("where", PLACES)
def test_external_data_inside_the_model_folder_is_read(tmp_path, where):
    """The same model with its data beside it, as exporters write it, runs and reshapes."""
    folder = tmp_path / where
    folder.mkdir()
    np.array([3, 2], np.int64).tofile(folder / "target.bin")
    path = folder / "m.onnx"
    onnx.save_model(_reshape_model("target.bin", where), path)
    graph = rt.onnx.load(str(path))
    out = rt.GraphModule(graph)(rt.tensor(np.arange(6, dtype=np.float32).reshape(2, 3)))
    assert tuple(out.shape) == (3, 2)


def test_external_data_in_a_model_given_without_a_path_is_refused(tmp_path, monkeypatch):
    np.array([3, 2], np.int64).tofile(tmp_path / "target.bin")
    monkeypatch.chdir(tmp_path)             # the file is right there, but not the model's folder
    model = _reshape_model("target.bin", "constant")
    with pytest.raises(rt.ModelFileError, match=r"^model: tensor 'target' stores its data in an external file"):
        rt.onnx.load(model)
