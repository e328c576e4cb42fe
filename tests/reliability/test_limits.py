"""Refusals below the file level: constants folded at trace time stay under a memory bound,
input shapes given to the ONNX importer are checked, convolution geometry is validated."""

from __future__ import annotations

import sys

import pytest

import flopcount
import flopcount.runtime as rt
from flopcount.runtime.graph.passes import constant_fold

FOLDING = sys.modules["flopcount.runtime.graph.folding"]


def test_a_constant_above_the_fold_limit_is_recorded_not_computed(monkeypatch):
    monkeypatch.setattr(FOLDING, "FOLD_LIMIT_BYTES", 1024)
    table = rt.ones(16, 16)   # 1 KiB: folds; its 4 KiB repetition does not

    def fn(x):
        return x + table.repeat(2, 2).sum() + (table * 2).sum()

    graph = rt.trace(fn, rt.randn(3))
    ops = [n.op_name for n in graph.nodes]
    assert ops.count("repeat") == 1 and "mul" not in ops  # the small product folded, the big repeat is a node
    assert float(rt.GraphModule(graph)(rt.zeros(3)).numpy()[0]) == 16 * 16 * 4 + 16 * 16 * 2
    folded = constant_fold(graph)
    assert [n.op_name for n in folded.nodes].count("repeat") == 1  # the pass keeps the same bound


def test_onnx_input_shapes_are_checked_naming_the_input():
    onnx = pytest.importorskip("onnx")
    from bad_corpus import mlp_onnx

    model = mlp_onnx()
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "batch"
    for shapes, fragment in [([(-2, 4)], "got -2"), ({"x": (1.5, 4)}, "got 1.5"), ({"x": 3}, "not a shape"),
                             ([(1, 4), (1, 4)], "2 shapes")]:
        with pytest.raises(flopcount.ShapeError, match="input") as info:
            rt.onnx.load(model, input_shapes=shapes)
        assert fragment in str(info.value)
    assert rt.onnx.load(model, input_shapes=[(2, 4)]).inputs[0].shape == (2, 4)
    assert rt.onnx.load(model, input_shapes=[(0, 4)]).inputs[0].shape == (0, 4)   # ONNX tensors may be empty
    del onnx


@pytest.mark.parametrize("kwargs, fragment", [
    (dict(stride=0), "stride (0, 0)"), (dict(dilation=0), "dilation (0, 0)"), (dict(padding=-1), "padding (-1, -1)"),
])
def test_conv_geometry_is_validated(kwargs, fragment):
    x, w = rt.randn(1, 2, 8, 8), rt.randn(3, 2, 3, 3)
    with pytest.raises(flopcount.ShapeError, match="conv") as info:
        rt.nn.functional.conv2d(x, w, **kwargs)
    assert fragment in str(info.value)
    with pytest.raises(flopcount.ShapeError, match="conv_transpose"):
        rt.nn.functional.conv_transpose2d(x, rt.randn(2, 3, 3, 3), **kwargs)


def test_gather_takes_integer_indices_only():
    x = rt.randn(2, 3)
    with pytest.raises(flopcount.ShapeError, match="gather: index must hold integers, got float32"):
        rt.gather(x, 1, rt.zeros(2, 1))
    assert rt.gather(x, 1, rt.zeros(2, 1, dtype="int64")).shape == (2, 1)
