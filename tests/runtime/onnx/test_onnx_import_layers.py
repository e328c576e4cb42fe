"""Layer ONNX ops (matrix products, convolutions, normalizations, pooling, softmax, resize):
one-node models imported by flopcount give onnxruntime's outputs, over attribute variants;
hypothesis draws convolution and pooling geometries. Also: which runtime ops they become,
and their MACs by COUNTING.md's formulas."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from onnx_check import C, Case, compare, randn

F32 = np.float32
I64 = np.int64

LAYER_OPS = {"MatMul", "Gemm", "Einsum", "Conv", "ConvTranspose", "BatchNormalization", "LayerNormalization",
             "GroupNormalization", "InstanceNormalization", "MaxPool", "AveragePool", "GlobalAveragePool",
             "GlobalMaxPool", "Softmax", "LogSoftmax", "Resize", "Upsample"}

IMG = randn(2, 4, 7, 6)
W = randn(6, 4, 3, 3, seed=1) * 0.3
B = randn(6, seed=2)

CASES = [
    # --- matrix products ---
    Case("MatMul", [randn(3, 4), C(randn(4, 5, seed=1))]), Case("MatMul", [randn(2, 1, 3, 4), randn(5, 4, 2, seed=1)]),
    Case("MatMul", [randn(4), randn(2, 4, 3, seed=1)]), Case("MatMul", [randn(2, 3, 4), randn(4, seed=1)]),
    Case("Gemm", [randn(3, 4), C(randn(5, 4, seed=1)), C(randn(5, seed=2))], {"transB": 1}),
    Case("Gemm", [randn(3, 4), C(randn(4, 5, seed=1)), C(randn(1, 5, seed=2))]),
    Case("Gemm", [randn(4, 3), randn(5, 4, seed=1), randn(3, 5, seed=2)],
         {"transA": 1, "transB": 1, "alpha": 0.5, "beta": 2.0}),
    Case("Gemm", [randn(3, 4), randn(4, 5, seed=1)], {"alpha": 1.5}),
    Case("Gemm", [randn(3, 4), randn(4, 5, seed=1), C(np.float32(1.0))]),
    Case("Einsum", [randn(2, 3, 4), randn(2, 4, 5, seed=1)], {"equation": "bij,bjk->bik"}),
    Case("Einsum", [randn(2, 3, 4)], {"equation": "bij->bji"}),
    Case("Einsum", [randn(2, 3, 5, 4), randn(2, 3, 6, 4, seed=1)], {"equation": "...qd,...kd->...qk"}),
    # --- convolutions ---
    Case("Conv", [IMG, C(W), C(B)], {"pads": [1, 1, 1, 1]}),
    Case("Conv", [IMG, C(W)], {"pads": [0, 1, 2, 0], "strides": [2, 1]}),  # asymmetric: an explicit pad
    Case("Conv", [IMG, C(W), C(B)], {"auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    Case("Conv", [IMG, C(W), C(B)], {"auto_pad": "SAME_LOWER", "strides": [2, 2]}),
    Case("Conv", [IMG, C(W)], {"auto_pad": "VALID", "dilations": [2, 1]}),
    Case("Conv", [IMG, C(randn(8, 2, 3, 3, seed=1)), C(randn(8))], {"group": 2, "pads": [1, 1, 1, 1]}),
    Case("Conv", [IMG, C(randn(4, 1, 3, 3, seed=1))], {"group": 4, "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    Case("Conv", [randn(2, 3, 9), C(randn(5, 3, 3, seed=1)), C(randn(5))], {"pads": [2, 0]}),
    Case("Conv", [randn(1, 2, 4, 5, 6), C(randn(3, 2, 2, 3, 3, seed=1))], {"pads": [0, 1, 1, 1, 1, 1]}),
    Case("ConvTranspose", [IMG, C(randn(4, 3, 3, 3, seed=1)), C(randn(3))], {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    Case("ConvTranspose", [IMG, C(randn(4, 3, 3, 3, seed=1))],
         {"strides": [2, 2], "pads": [1, 1, 1, 1], "output_padding": [1, 0]}),
    Case("ConvTranspose", [IMG, C(randn(4, 3, 3, 3, seed=1)), C(randn(3))], {"strides": [2, 2], "pads": [0, 1, 2, 1]}),
    Case("ConvTranspose", [IMG, C(randn(4, 3, 3, 3, seed=1)), C(randn(3))],
         {"strides": [2, 2], "output_shape": [15, 12]}),
    Case("ConvTranspose", [IMG, C(randn(4, 3, 3, 3, seed=1))], {"strides": [2, 3], "auto_pad": "SAME_UPPER"}),
    Case("ConvTranspose", [IMG, C(randn(4, 2, 3, 3, seed=1)), C(randn(4))], {"group": 2, "dilations": [2, 1]}),
    # --- normalization ---
    Case("BatchNormalization", [IMG, C(randn(4, seed=1)), C(randn(4, seed=2)), C(randn(4, seed=3)),
                                C(np.abs(randn(4, seed=4)) + 0.5)], {"epsilon": 1e-3}),
    Case("LayerNormalization", [randn(2, 5, 8), C(randn(8, seed=1)), C(randn(8, seed=2))]),
    Case("LayerNormalization", [randn(2, 5, 8), C(randn(5, 8, seed=1))], {"axis": -2, "epsilon": 1e-3}),
    Case("LayerNormalization", [randn(2, 5, 8), C(randn(1, 8, seed=1))], {"axis": 1}),  # broadcast scale
    Case("GroupNormalization", [IMG, C(randn(2, seed=1)), C(randn(2, seed=2))], {"num_groups": 2}, opset=18),
    Case("GroupNormalization", [IMG, C(randn(4, seed=1)), C(randn(4, seed=2))], {"num_groups": 2}, opset=21),
    Case("InstanceNormalization", [IMG, C(randn(4, seed=1)), C(randn(4, seed=2))], {"epsilon": 1e-3}),
    # --- pooling ---
    Case("MaxPool", [IMG], {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    Case("MaxPool", [IMG], {"kernel_shape": [2, 2]}),
    Case("MaxPool", [IMG], {"kernel_shape": [3, 2], "ceil_mode": 1, "strides": [2, 2]}),
    Case("MaxPool", [IMG], {"kernel_shape": [3, 3], "pads": [0, 2, 1, 0], "strides": [2, 2]}),
    Case("MaxPool", [IMG], {"kernel_shape": [2, 2], "auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    Case("MaxPool", [IMG], {"kernel_shape": [2, 2], "dilations": [2, 2]}),
    Case("MaxPool", [randn(2, 3, 9)], {"kernel_shape": [3], "strides": [2], "pads": [1, 1]}),
    Case("AveragePool", [IMG], {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    Case("AveragePool", [IMG], {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "count_include_pad": 1}),
    Case("AveragePool", [IMG], {"kernel_shape": [3, 3], "pads": [0, 2, 1, 0]}),
    Case("AveragePool", [IMG], {"kernel_shape": [3, 3], "pads": [0, 2, 1, 0], "count_include_pad": 1}),
    Case("AveragePool", [IMG], {"kernel_shape": [2, 2], "ceil_mode": 1, "strides": [2, 2]}),
    Case("AveragePool", [IMG], {"kernel_shape": [3, 3], "auto_pad": "SAME_LOWER", "strides": [2, 2]}),
    Case("GlobalAveragePool", [IMG]), Case("GlobalMaxPool", [IMG]), Case("GlobalAveragePool", [randn(2, 3, 4, 5, 6)]),
    # --- softmax ---
    Case("Softmax", [randn(2, 3, 5)]), Case("Softmax", [randn(2, 3, 5)], {"axis": 1}),
    Case("LogSoftmax", [randn(2, 3, 5)], {"axis": 0}),
    Case("Softmax", [randn(2, 3, 5)], opset=11),  # coerced to 2-d at axis 1 before opset 13
    Case("LogSoftmax", [randn(2, 3, 5)], {"axis": 2}, opset=11),
    Case("Softmax", [randn(2, 3, 5)], {"axis": -1}, opset=11),
    # --- resize ---
    Case("Resize", [IMG, None, C(np.array([1, 1, 2, 2], F32))],
         {"mode": "nearest", "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}),
    Case("Resize", [IMG, None, C(np.array([1, 1, 1.5, 2.5], F32))],
         {"mode": "nearest", "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}),
    Case("Resize", [IMG, None, None, C(np.array([2, 4, 11, 3], I64))],
         {"mode": "nearest", "coordinate_transformation_mode": "half_pixel", "nearest_mode": "round_prefer_ceil"}),
    Case("Resize", [IMG, None, C(np.array([1, 1, 0.5, 0.5], F32))], {"mode": "nearest"}),  # ONNX's defaults
    Case("Resize", [IMG, None, C(np.array([1, 1, 3, 2], F32))], {"mode": "nearest"}),
    Case("Resize", [IMG, None, None, C(np.array([2, 4, 5, 9], I64))],
         {"mode": "nearest", "coordinate_transformation_mode": "align_corners", "nearest_mode": "ceil"}),
    Case("Resize", [IMG, None, C(np.array([1, 1, 2, 2], F32))], {"mode": "linear"}),
    Case("Resize", [IMG, None, C(np.array([1, 1, 0.6, 1.7], F32))],
         {"mode": "linear", "coordinate_transformation_mode": "pytorch_half_pixel"}),
    Case("Resize", [IMG, None, None, C(np.array([2, 4, 13, 4], I64))],
         {"mode": "linear", "coordinate_transformation_mode": "align_corners"}),
    Case("Resize", [IMG, None, None, C(np.array([14, 9], I64))],
         {"mode": "nearest", "axes": [2, 3], "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"},
         opset=18),
    Case("Resize", [IMG, None, None, C(np.array([14, 14], I64))],
         {"mode": "linear", "axes": [2, 3], "keep_aspect_ratio_policy": "not_larger"}, opset=18),
    Case("Resize", [randn(1, 2, 5), None, C(np.array([1, 1, 2.0], F32))], {"mode": "linear"}),
    Case("Resize", [IMG, None, C(np.array([1, 1, 2, 1.5], F32))],  # no PyTorch mode: gathers and a blend
         {"mode": "linear", "coordinate_transformation_mode": "asymmetric"}),
    Case("Resize", [IMG, None, None, C(np.array([2, 4, 1, 3], I64))],
         {"mode": "linear", "coordinate_transformation_mode": "pytorch_half_pixel"}),
    Case("Resize", [IMG, None, C(np.array([1, 1, 1.7, 0.6], F32))],
         {"mode": "nearest", "coordinate_transformation_mode": "half_pixel_symmetric"}, opset=19),
    Case("Upsample", [IMG, C(np.array([1, 1, 2, 2], F32))], {"mode": "linear"}, opset=9),
    Case("Resize", [IMG, C(np.array([1, 1, 2, 2], F32))], {"mode": "nearest"}, opset=10),
    Case("Upsample", [IMG, C(np.array([1, 1, 2, 3], F32))], {"mode": "nearest"}, opset=9),
]


@pytest.mark.parametrize("case", CASES, ids=[f"{i}-{c.op_type}" for i, c in enumerate(CASES)])
def test_one_node_model_matches_onnxruntime(case):
    compare(case)


# --- geometry drawn by hypothesis ----------------------------------------------------------------

@st.composite
def conv_geometry(draw):
    k = draw(st.tuples(st.integers(1, 3), st.integers(1, 3)))
    stride = draw(st.tuples(st.integers(1, 3), st.integers(1, 3)))
    dilation = draw(st.tuples(st.integers(1, 2), st.integers(1, 2)))
    pads = draw(st.lists(st.integers(0, 2), min_size=4, max_size=4))
    groups = draw(st.sampled_from([1, 2]))
    return k, stride, dilation, pads, groups


@settings(max_examples=20, deadline=None)
@given(conv_geometry(), st.booleans())
def test_conv_geometries(geometry, transpose):
    k, stride, dilation, pads, groups = geometry
    attrs = {"strides": list(stride), "dilations": list(dilation), "pads": pads, "group": groups}
    x = randn(1, 4, 8, 7)
    if transpose:
        attrs["output_padding"] = [s - 1 for s in stride]
        w = randn(4, 3, *k, seed=1)
        compare(Case("ConvTranspose", [x, C(w), C(randn(3 * groups, seed=2))], attrs))
    else:
        compare(Case("Conv", [x, C(randn(6, 4 // groups, *k, seed=1)), C(randn(6, seed=2))], attrs))


@settings(max_examples=25, deadline=None)
@given(k=st.tuples(st.integers(1, 4), st.integers(1, 4)), stride=st.tuples(st.integers(1, 3), st.integers(1, 3)),
       pads=st.lists(st.integers(0, 3), min_size=4, max_size=4), ceil=st.booleans(),
       op=st.sampled_from(["MaxPool", "AveragePool0", "AveragePool1"]))
def test_pool_geometries(k, stride, pads, ceil, op):
    pads = [min(p, kk - 1) for p, kk in zip(pads, k + k)]  # ONNX Runtime needs pads < kernel
    attrs = {"kernel_shape": list(k), "strides": list(stride), "pads": pads, "ceil_mode": int(ceil)}
    if op != "MaxPool":
        attrs["count_include_pad"] = int(op[-1])
    compare(Case(op.rstrip("01"), [randn(1, 2, 9, 8)], attrs))


# --- what the counters see ---------------------------------------------------------------------

def _ops(graph) -> list:
    return [n.op_name for n in graph.nodes]


def test_layers_become_the_runtime_layer_ops():
    g = compare(Case("Gemm", [randn(3, 4), C(randn(5, 4, seed=1)), C(randn(5, seed=2))], {"transB": 1}))
    assert _ops(g) == ["linear"] and g.cost().macs == 3 * 4 * 5 and g.cost().flops == 2 * 3 * 4 * 5 + 3 * 5
    g = compare(Case("Conv", [IMG, C(W), C(B)], {"pads": [1, 1, 1, 1]}))
    assert _ops(g) == ["conv"] and g.cost().macs == 2 * 6 * 7 * 6 * 4 * 9  # N·Cout·prod(O)·Cin·prod(K)
    assert _ops(compare(Case("Conv", [IMG, C(W)], {"pads": [0, 1, 2, 0]}))) == ["pad", "conv"]
    assert _ops(compare(Case("GlobalAveragePool", [IMG]))) == ["adaptive_avg_pool"]
    assert _ops(compare(Case("Resize", [IMG, None, C(np.array([1, 1, 2, 2], F32))],
                             {"mode": "nearest", "coordinate_transformation_mode": "asymmetric",
                              "nearest_mode": "floor"}))) == ["upsample_nearest"]
    assert _ops(compare(Case("Resize", [IMG, None, C(np.array([1, 1, 2, 2], F32))], {"mode": "linear"}))) == [
        "upsample_bilinear"]
    assert "upsample_bilinear" not in _ops(compare(Case("Resize", [IMG, None, C(np.array([1, 1, 2, 2], F32))], {
        "mode": "linear", "coordinate_transformation_mode": "asymmetric"})))


def test_parameters_and_buffers_from_initializers():
    g = compare(Case("BatchNormalization", [IMG, C(randn(4, seed=1)), C(randn(4, seed=2)), C(randn(4, seed=3)),
                                            C(np.abs(randn(4, seed=4)) + 0.5)]))
    assert [v.kind for v in g.parameters.values()] == ["param", "param", "buffer", "buffer"]
    assert _ops(g) == ["batch_norm"] and g.cost().flops == 2 * IMG.size  # inference: folded scale and shift


def test_unsupported_attribute_values_name_the_node():
    import flopcount.runtime as rt

    with pytest.raises(rt.UnsupportedOpError, match="Resize node '/block/Resize'.*mode 'spline'"):
        compare(Case("Resize", [IMG, None, C(np.array([1, 1, 2, 2], F32))], {"mode": "spline"}))
    with pytest.raises(rt.UnsupportedOpError, match="training_mode=True with a ratio above 0"):
        compare(Case("Dropout", [IMG, C(np.array(0.5, F32)), C(np.array(True))]))
