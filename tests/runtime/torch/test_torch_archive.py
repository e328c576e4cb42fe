"""``torch.export.save`` archives (.pt2) read without unpickling: the same counts and outputs as
the module they were saved from, weights left unread on meta, dynamic dims bound from the
shapes given, and a pickled weight, a truncated or a foreign file refused in one line."""

from __future__ import annotations

import json
import os
import zipfile

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import flopcount  # noqa: E402
import flopcount.runtime as rt  # noqa: E402
from flopcount.runtime.errors import ModelFileError, ShapeError  # noqa: E402


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)
        self.bn = torch.nn.BatchNorm2d(4)
        self.fc = torch.nn.Linear(4, 2)
        self.register_buffer("offset", torch.full((2,), 0.5))

    def forward(self, x):
        y = torch.relu(self.bn(self.conv(x))).mean((2, 3))
        return self.fc(y) + self.offset + torch.tensor([1.0, 2.0])


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    torch.manual_seed(0)
    model = Net().eval()
    x = torch.randn(2, 3, 8, 8)
    path = tmp_path_factory.mktemp("pt2") / "net.pt2"
    torch.export.save(torch.export.export(model, (x,)), str(path))
    dynamic = path.with_name("dynamic.pt2")
    batch = torch.export.Dim("batch")
    torch.export.save(torch.export.export(model, (x,), dynamic_shapes=({0: batch},)), str(dynamic))
    return model, x, str(path), str(dynamic)


def test_an_archive_counts_and_computes_as_its_module(saved):
    model, x, path, _ = saved
    graph = rt.torch.load(path)
    with torch.no_grad():
        expected = model(x).numpy()
    np.testing.assert_allclose(rt.GraphModule(graph)(rt.tensor(x.numpy())).numpy(), expected, rtol=1e-5, atol=1e-6)
    report = flopcount.profile(path)
    direct = flopcount.profile(model, x)
    assert (report.macs, report.flops, report.params) == (direct.macs, direct.flops, direct.params)
    assert report.macs == 2 * 4 * 6 * 6 * 27 + 2 * 4 * 2
    assert report.row("conv").type == "Conv2d" and report.root.type == "Net"


def test_on_meta_no_weight_is_read(saved):
    _, _, path, _ = saved
    graph = rt.torch.load(path, device="meta")
    assert all(graph.tensors[name].data is None for name in graph.parameters)
    assert graph.cost().macs == rt.torch.load(path).cost().macs


def test_dynamic_dims_are_bound_from_the_shapes_given(saved):
    model, _, _, dynamic = saved
    with pytest.raises(ShapeError, match=r"dynamic dims"):
        rt.torch.load(dynamic)
    graph = rt.torch.load(dynamic, input_shapes=[(5, 3, 8, 8)])
    assert graph.inputs[0].shape == (5, 3, 8, 8)
    x = torch.randn(5, 3, 8, 8)
    with torch.no_grad():
        expected = model(x).numpy()
    np.testing.assert_allclose(rt.GraphModule(graph)(rt.tensor(x.numpy())).numpy(), expected, rtol=1e-5, atol=1e-6)
    assert flopcount.profile(dynamic, input_shape=(5, 3, 8, 8)).macs == 5 * (4 * 6 * 6 * 27 + 4 * 2)


def _rewrite(path: str, out: str, edit) -> None:
    """Copy the archive with ``edit(name, bytes) -> bytes`` applied to each member."""
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as dst:
        for info in src.infolist():
            dst.writestr(info, edit(info.filename, src.read(info.filename)))


def test_a_pickled_weight_is_refused_without_being_read(saved, tmp_path):
    _, _, path, _ = saved
    out = str(tmp_path / "pickled.pt2")

    def mark_pickled(name, data):
        if name.endswith("weights_config.json"):
            config = json.loads(data)
            for entry in config["config"].values():
                entry["use_pickle"] = True
            return json.dumps(config).encode()
        return data

    _rewrite(path, out, mark_pickled)
    with pytest.raises(ModelFileError, match=r"is stored as a pickle; flopcount never unpickles a file"):
        rt.torch.load(out)


def test_truncated_and_foreign_files(saved, tmp_path):
    _, _, path, _ = saved
    data = open(path, "rb").read()
    truncated = tmp_path / "truncated.pt2"
    truncated.write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelFileError, match=r"truncated\.pt2: not a torch\.export archive"):
        flopcount.profile(str(truncated))
    broken = str(tmp_path / "broken.pt2")
    _rewrite(path, broken, lambda name, d: d[:40] if name.endswith("models/model.json") else d)
    with pytest.raises(ModelFileError, match=r"broken\.pt2: not a readable torch\.export archive"):
        flopcount.profile(broken)
    with pytest.raises(ModelFileError, match=r"no such file"):
        flopcount.profile(str(tmp_path / "absent.pt2"))
    assert os.path.exists(path)
