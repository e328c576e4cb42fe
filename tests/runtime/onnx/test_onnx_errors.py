"""Files that cannot be imported fail with one clear error: truncated, random or non-ONNX files
and missing side files (ModelFileError naming the file), unsupported ops (all listed in one
UnsupportedOpError), symbolic dims without input shapes (ShapeError naming the input)."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

from onnx_check import C, Case, model_of, randn

import flopcount.runtime as rt
from data.make_onnx_fixtures import HERE

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

CNN = os.path.join(HERE, "cnn_torchscript_op13.onnx")


def _write(tmp_path, name: str, data: bytes) -> str:
    path = os.path.join(tmp_path, name)
    with open(path, "wb") as f:
        f.write(data)
    return path


@pytest.mark.parametrize("fraction", [0.0, 0.0005, 0.01, 0.25, 0.5, 0.9, 0.999])
def test_truncated_files(tmp_path, fraction):
    data = open(CNN, "rb").read()
    path = _write(tmp_path, "cut.onnx", data[:int(len(data) * fraction)])
    with pytest.raises(rt.ModelFileError, match=rf"^{path}: not (a readable|an|a valid) ONNX model"):
        rt.onnx.load(path, input_shapes=[(1, 3, 32, 32)])


def test_random_bytes_and_other_formats(tmp_path):
    random_file = _write(tmp_path, "random.onnx", np.random.default_rng(0).bytes(4096))
    text_file = _write(tmp_path, "config.onnx", b'{"model": "not an onnx file"}\n' * 20)
    for path in (random_file, text_file):
        with pytest.raises(rt.ModelFileError, match=rf"^{path}: not"):
            rt.onnx.load(path)
    with pytest.raises(rt.ModelFileError, match="no such file"):
        rt.onnx.load(os.path.join(tmp_path, "missing.onnx"))
    with pytest.raises(rt.ModelFileError, match="is a directory"):
        rt.onnx.load(str(tmp_path))


def _with_side_file(tmp_path):
    model = onnx.load(CNN)
    path = os.path.join(tmp_path, "cnn.onnx")
    onnx.save_model(model, path, save_as_external_data=True, all_tensors_to_one_file=True,
                    location="cnn.weights", size_threshold=0)
    return path, os.path.join(tmp_path, "cnn.weights")


def test_external_data_loads_from_the_model_directory(tmp_path, monkeypatch):
    path, _ = _with_side_file(tmp_path)
    monkeypatch.chdir(os.path.dirname(HERE))  # the side file resolves next to the model, not here
    x = randn(1, 3, 32, 32)
    ours = rt.GraphModule(rt.onnx.load(path, input_shapes=[x.shape]))(rt.tensor(x)).numpy()
    expected = rt.GraphModule(rt.onnx.load(CNN, input_shapes=[x.shape]))(rt.tensor(x)).numpy()
    np.testing.assert_array_equal(ours, expected)


def test_missing_or_short_external_data(tmp_path):
    path, weights = _with_side_file(tmp_path)
    shutil.copy(weights, weights + ".bak")
    os.remove(weights)
    with pytest.raises(rt.ModelFileError, match=rf"^{path}: .*cnn.weights"):
        rt.onnx.load(path, input_shapes=[(1, 3, 32, 32)])
    with open(weights + ".bak", "rb") as f:
        _write(tmp_path, "cnn.weights", f.read()[:1000])
    with pytest.raises(rt.ModelFileError, match=rf"^{path}: cannot read the model's external weight data"):
        rt.onnx.load(path, input_shapes=[(1, 3, 32, 32)])


def test_every_unsupported_op_in_one_error():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])
    # TfIdfVectorizer: a standard op flopcount has no converter for
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="ok"),
             helper.make_node("FusedThing", ["a"], ["b"], name="custom_1", domain="com.example"),
             helper.make_node("FusedThing", ["b"], ["c"], name="custom_2", domain="com.example"),
             helper.make_node("TfIdfVectorizer", ["c"], ["y"], name="tfidf", mode="TF", min_gram_length=1,
                              max_gram_length=1, max_skip_count=0, ngram_counts=[0], ngram_indexes=[0],
                              pool_int64s=[1])]
    graph = helper.make_graph(nodes, "g", [x], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)],
                              ir_version=8)
    with pytest.raises(rt.UnsupportedOpError) as info:
        rt.onnx.load(model, strict=True)
    message = str(info.value)
    assert "2 ONNX op type(s) with no converter" in message
    assert "TfIdfVectorizer (1 node: 'tfidf')" in message
    assert "com.example.FusedThing (2 nodes: 'custom_1', 'custom_2')" in message
    assert "Relu" not in message


def _two_inputs():
    ids = helper.make_tensor_value_info("input_ids", TensorProto.FLOAT, ["batch", "sequence"])
    mask = helper.make_tensor_value_info("attention_mask", TensorProto.FLOAT, ["batch", "sequence"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "sequence"])
    graph = helper.make_graph([helper.make_node("Mul", ["input_ids", "attention_mask"], ["y"])], "g", [ids, mask], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_symbolic_dims_need_input_shapes():
    model = _two_inputs()
    with pytest.raises(rt.ShapeError, match=r"input 'input_ids' has symbolic dims \['batch', 'sequence'\]; "
                                            r"input 'attention_mask' has symbolic dims \['batch', 'sequence'\]; "
                                            r"pass input_shapes"):
        rt.onnx.load(model)
    # one input's shape binds the names the other shares
    graph = rt.onnx.load(model, input_shapes={"input_ids": (2, 7)})
    assert [v.shape for v in graph.inputs] == [(2, 7), (2, 7)]
    graph = rt.onnx.load(model, input_shapes=[(1, 3), (1, 3)])
    assert [v.shape for v in graph.inputs] == [(1, 3), (1, 3)]


@pytest.mark.parametrize("shapes, message", [
    ({"input_ids": (2, 7), "attention_mask": (3, 7)}, r"symbolic dim 'batch' is 2 for input 'input_ids' but 3"),
    ({"input_ids": (2, 7, 1)}, r"input 'input_ids' has 2 dims \[batch, sequence\], but input_shapes gives 3"),
    ({"ids": (2, 7)}, r"input_shapes names \['ids'\], which are not inputs of the model"),
    ([(1, 2), (1, 2), (1, 2)], r"input_shapes gives 3 shapes but the model has 2 input"),
])
def test_bad_input_shapes(shapes, message):
    with pytest.raises(rt.ShapeError, match=message):
        rt.onnx.load(_two_inputs(), input_shapes=shapes)


def test_fixed_dims_are_checked():
    model = model_of(Case("Relu", [randn(2, 3)]))
    with pytest.raises(rt.ShapeError, match=r"input 'x0' has dims \[2, 3\]; input_shapes gives \(2, 4\)"):
        rt.onnx.load(model, input_shapes={"x0": (2, 4)})


def test_a_shape_from_an_input_s_values_needs_those_values():
    # a Reshape whose target is a graph input: its values are part of the graph, as shapes are
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6])
    target = helper.make_tensor_value_info("target", TensorProto.INT64, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    graph = helper.make_graph([helper.make_node("Reshape", ["x", "target"], ["y"], name="/r/Reshape")], "g",
                              [x, target], [y])
    model = onnx.shape_inference.infer_shapes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                                                                ir_version=8))
    with pytest.raises(rt.ShapeError, match=r"Reshape node '/r/Reshape': input 'shape' is computed from the "
                                            r"values of graph input\(s\) 'target'; bind them: "
                                            r"input_values=\{'target': \.\.\.\}$"):
        rt.onnx.load(model)
    g = rt.onnx.load(model, input_values={"target": [3, 4]})
    assert [v.name for v in g.inputs] == ["x"] and g.outputs[0].shape == (3, 4)


def test_runtime_shape_errors_name_the_node():
    model = model_of(Case("Add", [randn(2, 3), C(randn(2, 3))]))
    model.graph.node[0].input[1] = "c1"
    model.graph.initializer[0].name = "c1"
    bad = onnx.numpy_helper.from_array(randn(4), "c1")
    model.graph.initializer[0].CopyFrom(bad)
    model.graph.output[0].type.tensor_type.shape.Clear()
    with pytest.raises(rt.ShapeError, match=r"Add node '/block/Add': add: shapes \(2, 3\) and \(4,\)"):
        rt.onnx.load(model)
