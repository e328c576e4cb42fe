"""Native files: one safetensors file with the graph as JSON in its metadata."""

import hashlib
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from safetensors import safe_open
from safetensors.numpy import save_file

import flopcount.runtime as rt

nn = rt.nn
F = rt.nn.functional
HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, "..", "graph"))
from graph_models import Attention, MLP, SmallCNN, randomize_norms  # noqa: E402


def _models():
    cnn = SmallCNN().eval()
    randomize_norms(cnn)
    return [(MLP(), (2, 4)), (cnn, (2, 3, 16, 16)), (Attention(), (2, 5, 16))]


@pytest.mark.parametrize("index", range(3))
def test_round_trip_preserves_outputs_exactly(tmp_path, index):
    model, shape = _models()[index]
    x = rt.randn(*shape)
    graph = rt.trace(model, x)
    path = tmp_path / "model.safetensors"
    rt.save(graph, path)
    loaded = rt.load(path)
    assert str(loaded) == str(graph)
    np.testing.assert_array_equal(rt.GraphModule(loaded)(x).numpy(), rt.GraphModule(graph)(x).numpy())


def test_attrs_of_every_kind_survive(tmp_path):
    def fn(x):
        y = F.pad(x, (1, 2))                       # a tuple of tuples
        y = y[:, 1:3]                              # a list of index items
        return y.to(rt.float64).softmax(-1), x.sum(dim=(0,), keepdim=True)

    x = rt.randn(2, 4)
    graph = rt.trace(fn, x)
    rt.save(graph, tmp_path / "f.safetensors")
    loaded = rt.load(tmp_path / "f.safetensors")
    for a, b in zip(loaded.nodes, graph.nodes):
        assert a.attrs == b.attrs and type(a.attrs.get("items")) is type(b.attrs.get("items"))
    for got, want in zip(rt.GraphModule(loaded)(x), rt.GraphModule(graph)(x)):
        np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_the_file_is_one_safetensors_file_with_a_checksummed_graph(tmp_path):
    path = str(tmp_path / "mlp.safetensors")
    rt.save(MLP(), path, example_inputs=(rt.randn(2, 4),))
    with safe_open(path, framework="numpy") as f:
        meta = f.metadata()
        keys = sorted(f.keys())
    assert keys == ["c", "fc1.bias", "fc1.weight", "fc2.bias", "fc2.weight"]
    assert meta["format"] == "flopcount" and meta["format_version"] == "1"
    assert hashlib.sha256(meta["graph"].encode()).hexdigest() == meta["graph_sha256"]
    doc = json.loads(meta["graph"])
    assert [n["op"] for n in doc["nodes"]] == ["linear", "relu", "linear", "mul"]
    assert [n["scope"] for n in doc["nodes"]] == ["fc1", "act", "fc2", ""]
    assert doc["inputs"] == [{"name": "x", "shape": [2, 4], "dtype": "float32"}]


def test_a_loaded_graph_runs_without_the_class_that_made_it(tmp_path):
    model = MLP()
    x = rt.randn(2, 4)
    path = tmp_path / "mlp.safetensors"
    rt.save(model, path, example_inputs=(x,))
    np.save(tmp_path / "x.npy", x.numpy())
    np.save(tmp_path / "want.npy", model(x).numpy())
    script = (f"import numpy as np, flopcount.runtime as rt\n"
              f"g = rt.load({str(path)!r})\n"
              f"out = rt.GraphModule(g)(rt.tensor(np.load({str(tmp_path / 'x.npy')!r})))\n"
              f"assert np.array_equal(out.numpy(), np.load({str(tmp_path / 'want.npy')!r}))\n")
    root = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
    done = subprocess.run([sys.executable, "-c", script], cwd=root, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": root})
    assert done.returncode == 0, done.stderr


def test_state_dict_round_trip(tmp_path):
    model = SmallCNN().eval()
    randomize_norms(model)
    path = tmp_path / "weights.safetensors"
    rt.save(model.state_dict(), path)
    loaded = rt.load_state_dict(path)
    assert list(loaded) == list(model.state_dict())
    assert loaded["bn.num_batches_tracked"].shape == () and loaded["bn.num_batches_tracked"].dtype is rt.int64
    other = SmallCNN().eval()
    other.load_state_dict(loaded)
    x = rt.randn(1, 3, 8, 8)
    np.testing.assert_array_equal(other(x).numpy(), model(x).numpy())
    with pytest.raises(rt.ModelFileError, match="holds a state dict"):
        rt.load(path)
    graph_file = tmp_path / "graph.safetensors"
    rt.save(rt.trace(model, x), graph_file)
    assert sorted(rt.load_state_dict(graph_file)) == sorted(model.state_dict())


def test_a_meta_graph_saves_its_structure_without_data(tmp_path):
    model = MLP().to("meta")
    graph = rt.trace(model, rt.randn(2, 4, device="meta"))
    rt.save(graph, tmp_path / "meta.safetensors")
    loaded = rt.load(tmp_path / "meta.safetensors")
    assert all(loaded.tensors[n].device.type == "meta" for n in loaded.parameters)
    assert rt.GraphModule(loaded)(rt.randn(2, 4, device="meta")).shape == (2, 3)


def test_saving_a_module_needs_example_inputs(tmp_path):
    with pytest.raises(TypeError, match="example_inputs"):
        rt.save(MLP(), tmp_path / "m.safetensors")


# --- damaged files ---------------------------------------------------------------------------

@pytest.fixture
def saved(tmp_path):
    path = tmp_path / "mlp.safetensors"
    rt.save(rt.trace(MLP(), rt.randn(2, 4)), path)
    return path


def test_missing_and_tiny_files(tmp_path):
    with pytest.raises(rt.ModelFileError, match="no such file"):
        rt.load(tmp_path / "nothing.safetensors")
    tiny = tmp_path / "tiny.safetensors"
    tiny.write_bytes(b"abc")
    with pytest.raises(rt.ModelFileError, match=r"tiny.safetensors: 3 bytes is too short"):
        rt.load(tiny)


def test_a_file_that_is_not_safetensors(tmp_path):
    path = tmp_path / "notes.safetensors"
    path.write_text("these are not the tensors you are looking for" * 10)
    with pytest.raises(rt.ModelFileError, match="notes.safetensors: not a safetensors file or truncated"):
        rt.load(path)


def test_a_truncated_file(saved):
    data = saved.read_bytes()
    saved.write_bytes(data[:-40])
    with pytest.raises(rt.ModelFileError, match="only .* bytes of data \\(truncated\\?\\)"):
        rt.load(saved)
    saved.write_bytes(data[:100])  # cut inside the header
    with pytest.raises(rt.ModelFileError, match="truncated"):
        rt.load(saved)


def test_a_corrupted_graph_header_fails_its_checksum(saved):
    data = saved.read_bytes()
    assert data.count(b'\\"op\\":\\"relu\\"') == 1
    saved.write_bytes(data.replace(b'\\"op\\":\\"relu\\"', b'\\"op\\":\\"tanh\\"'))  # still valid JSON
    with pytest.raises(rt.ModelFileError, match="graph header is corrupted .*checksum"):
        rt.load(saved)


def test_declared_sizes_beyond_the_file_are_refused_before_allocating(tmp_path):
    header = json.dumps({"w": {"dtype": "F32", "shape": [1_000_000_000],
                               "data_offsets": [0, 4_000_000_000]}}).encode()
    path = tmp_path / "huge.safetensors"
    path.write_bytes(len(header).to_bytes(8, "little") + header + b"\0" * 16)
    with pytest.raises(rt.ModelFileError, match="tensor 'w' needs bytes up to 4000000000 .* only 16"):
        rt.load_state_dict(path)


def test_a_plain_safetensors_file_is_not_a_model_file(tmp_path):
    path = str(tmp_path / "plain.safetensors")
    save_file({"w": np.zeros(3, np.float32)}, path)
    with pytest.raises(rt.ModelFileError, match="not a flopcount model file"):
        rt.load(path)


def _rewrite_graph(path, edit, version="1"):
    """Re-save ``path`` with its graph JSON changed by ``edit`` and a matching checksum."""
    with safe_open(str(path), framework="numpy") as f:
        meta = f.metadata()
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    doc = json.loads(meta["graph"])
    edit(doc)
    text = json.dumps(doc)
    meta.update(graph=text, graph_sha256=hashlib.sha256(text.encode()).hexdigest(), format_version=version)
    save_file(tensors, str(path), metadata=meta)


def test_unknown_ops_newer_versions_and_inconsistent_shapes_are_named(saved):
    original = saved.read_bytes()
    _rewrite_graph(saved, lambda doc: doc["nodes"][1].update(op="frobnicate"))
    with pytest.raises(rt.ModelFileError, match="node 1 uses op 'frobnicate'"):
        rt.load(saved)
    saved.write_bytes(original)
    _rewrite_graph(saved, lambda doc: None, version="2")
    with pytest.raises(rt.ModelFileError, match="format version '2' is newer"):
        rt.load(saved)
    saved.write_bytes(original)
    _rewrite_graph(saved, lambda doc: doc["nodes"][0]["outputs"][0].update(shape=[2, 9]))
    with pytest.raises(rt.ModelFileError, match=r"node 0 \(linear, %linear\) records outputs"):
        rt.load(saved)
