"""Export of the runtime ops that are ONNX operators themselves (``emitters/onnx_ops.py``: TopK's
neighbours, the scatters, GridSample, RoiAlign, NonMaxSuppression, DFT, the trigonometric and
bitwise ops...). Each is written at an opset that has its operator, checked by onnx.checker, run
in onnxruntime against flopcount's eager result, and imported back; ops the exporter's opsets
cannot hold are refused with one line naming the node."""

from __future__ import annotations

import numpy as np
import pytest

from onnx_check import assert_same, run_ort

import flopcount.runtime as rt
from flopcount.runtime.dispatch import apply
from flopcount.runtime.onnx.exporter import to_model
from flopcount.runtime.ops import (bitwise, complex_arith, cumulative, detection, determinant, grid_sample,
                                   histogram, linalg, opaque, resample, scatter, selection, spectral, trigonometric)

onnx = pytest.importorskip("onnx")


def arr(*shape, seed=0, low=None, high=None, dtype=np.float32):
    g = np.random.default_rng(seed)
    if low is not None:
        return g.integers(low, high, shape).astype(dtype)
    return g.standard_normal(shape).astype(dtype)


def unit(*shape, seed=0):
    """Values inside (-1, 1), where every inverse trigonometric function is defined."""
    return (np.tanh(arr(*shape, seed=seed)) * 0.9).astype(np.float32)


INTS = arr(3, 4, low=0, high=64, dtype=np.int32)
SHIFTS = arr(3, 4, low=0, high=4, dtype=np.uint8)
BOXES = np.array([[[0.0, 0.0, 1.0, 1.0], [0.0, 0.1, 1.0, 1.1], [0.0, 2.0, 1.0, 3.0], [0.5, 0.5, 1.5, 1.5]]],
                 np.float32)
SCORES = np.array([[[0.9, 0.8, 0.7, 0.6], [0.1, 0.5, 0.4, 0.95]]], np.float32)

# (name, fn, inputs, the opset to write)
CASES = [
    *[(op, getattr(trigonometric, op), [unit(3, 4)], 13) for op in ("tan", "asin", "acos", "atan", "sinh",
                                                                          "cosh", "asinh", "atanh")],
    ("acosh", trigonometric.acosh, [np.abs(arr(3, 4)) + 1.5], 13),
    *[(op, getattr(bitwise, op), [INTS, INTS[::-1].copy()], 18)
      for op in ("bitwise_and", "bitwise_or", "bitwise_xor")],
    ("bitwise_not", bitwise.bitwise_not, [INTS], 18),
    ("bitshift", lambda a, b: bitwise.bitshift(a, b, "left"), [SHIFTS * 3, SHIFTS], 13),
    ("nonzero", lambda x: selection.nonzero(x > 0), [arr(3, 4)], 13),
    ("sort", lambda x: selection.sort(x, 1, descending=True)[0] + selection.sort(x, 0)[0], [arr(3, 4)], 13),
    ("sort_indices", lambda x: selection.sort(x, -1)[1], [arr(3, 5)], 13),
    ("complex_mul", lambda a, c: complex_arith.complex_mul(a, c) + complex_arith.complex_mul(a, c, conjugate=True),
     [arr(3, 4, 2), arr(4, 2, seed=1)], 13),
    ("unique", lambda x: selection.unique(x, dim=None, sorted=True)[0],
     [arr(10, low=0, high=4, dtype=np.float32)], 13),
    ("scatter_elements", lambda x, i, u: scatter.scatter_elements(x, 1, i, u, "add"),
     [arr(3, 5), arr(3, 2, low=0, high=5, dtype=np.int64), arr(3, 2, seed=1)], 16),
    ("scatter_nd", lambda x, i, u: scatter.scatter_nd(x, i, u),
     [arr(4, 3), np.array([[1], [3]], np.int64), arr(2, 3, seed=1)], 13),
    ("grid_sample", lambda x, g: grid_sample.grid_sample(x, g, align_corners=True),
     [arr(1, 2, 5, 6), unit(1, 3, 4, 2, seed=1)], 16),
    ("roi_align", lambda x, r, b: detection.roi_align(x, r, b, (2, 2), spatial_scale=0.5, sampling_ratio=2,
                                                      aligned=True),
     [arr(2, 3, 8, 8), np.array([[0.0, 0.0, 6.0, 6.0], [2.0, 1.0, 9.0, 7.0]], np.float32),
      np.array([0, 1], np.int64)], 16),
    ("non_max_suppression", lambda b, s: detection.non_max_suppression(b, s, 2, 0.5, 0.3),
     [BOXES, SCORES], 13),
    ("resample", lambda x: resample.resample(x, rt.tensor(np.array([[0, 1], [2, 3], [4, 5]])),
                                             rt.tensor(np.array([[0.25, 0.75], [0.5, 0.5], [1.0, 0.0]], np.float32)), 2),
     [arr(2, 3, 6)], 13),
    ("dft", lambda x: spectral.dft(x, dim=1, length=8, onesided=True), [arr(2, 8, 1)], 20),
    ("det", determinant.det, [arr(2, 3, 3)], 13),
]


@pytest.mark.parametrize("name, fn, arrays, opset", CASES, ids=[c[0] for c in CASES])
def test_onnx_native_op_exports(name, fn, arrays, opset):
    tensors = [rt.tensor(a) for a in arrays]
    with rt.no_grad():
        expected = fn(*tensors)
    graph = rt.trace(fn, *tensors)
    model = to_model(graph, opset)
    onnx.checker.check_model(model, full_check=True)
    theirs = run_ort(model, {v.name: a for v, a in zip(graph.inputs, arrays)})
    assert_same([expected], theirs, rtol=1e-4, atol=1e-5, what=f"{name} in onnxruntime")
    back = rt.onnx.load(model)
    assert_same([rt.GraphModule(back)(*tensors)], [expected.numpy()], rtol=1e-4, atol=1e-5, what=f"{name} imported back")


def test_an_operator_before_its_opset_is_refused():
    # the exporter writes opsets 13..20: CumProd and BitCast (opset 26) are refused in one line
    for fn, op_type in ((lambda x: cumulative.cumprod(x, 0), "CumProd"),
                        (lambda x: bitwise.bitcast(x, "int32"), "BitCast")):
        with pytest.raises(rt.UnsupportedOpError, match=f"{op_type} needs opset 26 or later .exporting at opset 20"):
            to_model(rt.trace(fn, rt.randn(3)), 20)
    with pytest.raises(rt.UnsupportedOpError, match="BitwiseAnd needs opset 18"):
        to_model(rt.trace(bitwise.bitwise_and, rt.tensor(INTS), rt.tensor(INTS)), 17)


REFUSED = {"inverse", "opaque", "cumprod", "bitcast", "histc", "grouped_mm"}


def test_export_refuses_ops_onnx_has_no_operator_for():
    inverse = rt.registered_ops()["inverse"]
    with pytest.raises(rt.UnsupportedOpError, match="no matrix inverse operator"):
        to_model(rt.trace(lambda x: apply(inverse, x), rt.randn(3, 3)), 17)
    unknown = rt.trace(lambda x: opaque.opaque(x, label="ONNX Foo", node="foo", outputs=[((3,), "float32")]),
                       rt.randn(3))
    with pytest.raises(rt.UnsupportedOpError, match="ONNX Foo node 'foo' was imported without a converter"):
        to_model(unknown, 17)
    with pytest.raises(rt.UnsupportedOpError, match="no histogram operator"):
        to_model(rt.trace(lambda x: histogram.histc(x, 4, -1.0, 1.0), rt.randn(8)), 17)
    offsets = rt.tensor(np.array([1, 3]))
    with pytest.raises(rt.UnsupportedOpError, match="no grouped matrix product"):
        to_model(rt.trace(lambda x, w: linalg.grouped_mm(x, w, offsets), rt.randn(3, 2), rt.randn(2, 2, 4)), 17)

