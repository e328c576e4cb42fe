"""The converters of attention, selection, detection, sampling, losses, recurrent layers and the
rarer math and pooling ops: one-node models imported by flopcount give onnxruntime's outputs,
over attribute variants and opsets; plus which runtime ops they become and what they count."""

from __future__ import annotations

import numpy as np
import pytest

from onnx_check import C, Case, compare, randn, rng

F32 = np.float32
I64 = np.int64

FAMILY_OPS = {
    "Attention", "RotaryEmbedding", "RMSNormalization", "TopK", "NonZero", "Unique", "Compress", "Hardmax",
    "ScatterElements", "Scatter", "CumProd", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh",
    "Atanh", "BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitwiseNot", "BitShift", "Swish", "EyeLike",
    "ReverseSequence", "CenterCropPad", "LRN", "LpPool", "GlobalLpPool", "LpNormalization",
    "MeanVarianceNormalization", "MaxUnpool", "NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss",
    "GridSample", "AffineGrid", "Col2Im", "RoiAlign", "NonMaxSuppression", "RNN", "GRU", "LSTM",
    "LinearAttention", "CausalConvWithState", "HannWindow", "HammingWindow", "MelWeightMatrix", "TensorScatter",
    "OptionalHasElement", "OptionalGetElement", "BitCast", "Det",
}

Q, K, V = randn(2, 3, 4, 8), randn(2, 3, 6, 8, seed=1), randn(2, 3, 6, 5, seed=2)
IMG = randn(2, 4, 7, 6)
UNIT = np.tanh(randn(3, 4)) * 0.9


def ints(*shape, low=0, high=8, seed=0, dtype=I64):
    return rng(seed).integers(low, high, shape).astype(dtype)


def _rnn_weights(op: str, directions: int, hidden: int, inputs: int, seed: int = 0) -> tuple:
    gates = {"RNN": 1, "GRU": 3, "LSTM": 4}[op]
    w = randn(directions, gates * hidden, inputs, seed=seed) * 0.5
    r = randn(directions, gates * hidden, hidden, seed=seed + 1) * 0.5
    b = randn(directions, 2 * gates * hidden, seed=seed + 2) * 0.5
    return C(w), C(r), C(b)


def _rnn_cases() -> list:
    x = randn(5, 2, 3)
    cases = []
    for op in ("RNN", "GRU", "LSTM"):
        outs = 3 if op == "LSTM" else 2
        for direction, d in (("forward", 1), ("reverse", 1), ("bidirectional", 2)):
            w, r, b = _rnn_weights(op, d, 4, 3)
            cases.append(Case(op, [x, w, r, b], {"hidden_size": 4, "direction": direction}, outputs=outs))
        w, r, b = _rnn_weights(op, 2, 4, 3, seed=3)
        lengths, h0 = C(np.array([5, 3], np.int32)), randn(2, 2, 4, seed=7)
        cases.append(Case(op, [x, w, r, b, lengths, h0], {"hidden_size": 4, "direction": "bidirectional"},
                          outputs=outs))
        w, r, b = _rnn_weights(op, 1, 4, 3, seed=5)
        cases.append(Case(op, [x, w, r, b], {"hidden_size": 4, "clip": 0.5}, outputs=outs))
    w, r, b = _rnn_weights("GRU", 1, 4, 3, seed=9)
    cases.append(Case("GRU", [x, w, r, b], {"hidden_size": 4, "linear_before_reset": 1}, outputs=2))
    w, r, b = _rnn_weights("LSTM", 1, 4, 3, seed=11)
    peepholes = C(randn(1, 12, seed=12) * 0.5)
    cases.append(Case("LSTM", [x, w, r, b, None, None, None, peepholes], {"hidden_size": 4}, outputs=3))
    cases.append(Case("RNN", [x, *_rnn_weights("RNN", 1, 4, 3)],
                      {"hidden_size": 4, "activations": ["LeakyRelu"], "activation_alpha": [0.2]}, outputs=2))
    return cases


CASES = [
    # --- attention (opset 23) ---
    Case("Attention", [Q, K, V], opset=23),
    Case("Attention", [Q, K, V, randn(4, 6, seed=3)], {"scale": 0.3}, opset=23),
    Case("Attention", [Q, K, V, rng(1).random((2, 1, 4, 6)) > 0.3], opset=23),
    Case("Attention", [Q, randn(2, 1, 6, 8, seed=1), randn(2, 1, 6, 5, seed=2)], {"is_causal": 1}, opset=23),
    Case("Attention", [randn(2, 4, 32), randn(2, 6, 16, seed=1), randn(2, 6, 16, seed=2)],
         {"q_num_heads": 4, "kv_num_heads": 2}, opset=23),
    Case("Attention", [Q, K, V, None, randn(2, 3, 2, 8, seed=4), randn(2, 3, 2, 5, seed=5)], {"is_causal": 1},
         opset=23, outputs=3),
    Case("Attention", [Q, K, V, randn(4, 6, seed=3)], {"softcap": 2.0, "qk_matmul_output_mode": 2}, opset=23,
         outputs=4),
    # --- rotary embeddings, RMS norm, layer norm's statistics ---
    Case("RotaryEmbedding", [randn(2, 3, 5, 8), C(randn(2, 5, 4, seed=1)), C(randn(2, 5, 4, seed=2))], opset=23),
    Case("RotaryEmbedding", [randn(2, 5, 12), C(randn(2, 5, 2, seed=1)), C(randn(2, 5, 2, seed=2))],
         {"num_heads": 3, "interleaved": 1, "rotary_embedding_dim": 4}, opset=23),
    Case("RMSNormalization", [randn(2, 5, 8), C(randn(8, seed=1))], {"epsilon": 1e-3}, opset=23),
    Case("RMSNormalization", [randn(2, 5, 8), C(randn(5, 8, seed=1))], {"axis": 1}, opset=23),
    # --- selection ---
    Case("TopK", [randn(3, 7), C(np.array([3], I64))], {"axis": 1}, outputs=2),
    Case("TopK", [np.array([[1, 3, 3, 2], [5, 5, 0, 5]], F32), C(np.array([2], I64))], {"largest": 0}, outputs=2),
    Case("NonZero", [np.array([[0, 1.5, 0], [2, 0, -1]], F32)]),
    Case("Unique", [np.array([3, 1, 3, 2, 1], F32)], {"sorted": 0}, outputs=4),
    Case("Unique", [np.array([[1, 2], [0, 1], [1, 2]], F32)], {"axis": 0}, outputs=4),
    Case("Compress", [randn(3, 4), np.array([True, False, True])], {"axis": 0}),
    Case("Compress", [randn(3, 4), np.array([False, True, True, False, True])]),
    Case("Hardmax", [np.array([[1, 3, 3], [0, -1, 5]], F32)]),
    Case("Hardmax", [randn(2, 3, 4)], {"axis": 1}, opset=11),
    # --- scatter, cumulative, elementwise ---
    Case("ScatterElements", [randn(3, 4), ints(3, 2, high=4), randn(3, 2, seed=1)], {"axis": 1, "reduction": "add"},
         opset=18),
    Case("ScatterElements", [randn(3, 4), ints(3, 2, high=4), randn(3, 2, seed=1)], {"axis": 1, "reduction": "max"},
         opset=18),
    Case("ScatterND", [randn(4, 3), C(np.array([[0], [2], [0]], I64)), randn(3, 3, seed=1)], {"reduction": "mul"},
         opset=18),
    Case("Scatter", [randn(3, 4), C(np.array([[0, 3], [2, 1], [1, 0]], I64)), randn(3, 2, seed=1)], {"axis": 1},
         opset=10),
    *[Case(op, [UNIT]) for op in ("Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Atanh")],
    Case("Acosh", [1.5 + np.abs(randn(3, 4))]),
    *[Case(op, [ints(3, 4, low=-9, high=9, dtype=np.int32), ints(4, low=-9, high=9, seed=1, dtype=np.int32)], opset=18)
      for op in ("BitwiseAnd", "BitwiseOr", "BitwiseXor")],
    Case("BitwiseNot", [ints(3, 4, low=-9, high=9, dtype=np.int32)], opset=18),
    Case("BitShift", [ints(6, high=200, dtype=np.uint8), ints(6, high=4, seed=1, dtype=np.uint8)],
         {"direction": "LEFT"}),
    Case("BitShift", [ints(6, high=200, dtype=np.uint8), ints(6, high=4, seed=1, dtype=np.uint8)],
         {"direction": "RIGHT"}),
    Case("EyeLike", [randn(3, 5)], {"k": 1}), Case("EyeLike", [randn(4, 4)], {"dtype": 7}),
    Case("ReverseSequence", [randn(4, 3, 2), C(np.array([4, 1, 3], I64))], {"time_axis": 0, "batch_axis": 1}),
    Case("ReverseSequence", [randn(3, 4, 2), C(np.array([2, 4, 1], I64))], {"time_axis": 1, "batch_axis": 0}),
    Case("CenterCropPad", [randn(5, 4, 3), C(np.array([3, 6], I64))], {"axes": [0, 1]}, opset=18),
    # --- pooling and normalization ---
    Case("LRN", [IMG], {"size": 3, "alpha": 0.01, "beta": 0.6, "bias": 2.0}),
    Case("LpPool", [IMG], {"kernel_shape": [3, 2], "strides": [2, 1], "pads": [1, 0, 1, 1], "p": 3}, opset=18),
    Case("LpPool", [IMG], {"kernel_shape": [2, 2], "dilations": [2, 1]}, opset=18),
    Case("GlobalLpPool", [IMG], {"p": 3}),
    Case("LpNormalization", [randn(3, 4)], {"axis": 0, "p": 1}),
    Case("MeanVarianceNormalization", [randn(2, 3, 4, 5)], {"axes": [0, 2, 3]}, opset=9),
    # (AveragePool with dilations: onnxruntime divides windows that reach into the padding by the
    # wrong count; ONNX's own node tests of it run in test_onnx_conformance.py)
    Case("MaxPool", [IMG], {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}, outputs=2),
    Case("MaxPool", [IMG], {"kernel_shape": [2, 3], "storage_order": 1}, outputs=2),
    # indices into the (2, 4, 6, 6) output: one position per 2x2 window of each plane
    Case("MaxUnpool", [randn(2, 4, 3, 3), C((np.arange(9) // 3 * 12 + np.arange(9) % 3 * 2 + np.arange(9) % 2 * 7
                                             + 36 * np.arange(8).reshape(8, 1)).reshape(2, 4, 3, 3))],
         {"kernel_shape": [2, 2], "strides": [2, 2]}),
    # --- losses ---
    Case("NegativeLogLikelihoodLoss", [randn(4, 5), ints(4, high=5)], opset=13),
    Case("NegativeLogLikelihoodLoss", [randn(4, 5, 3), ints(4, 3, high=5), C(np.abs(randn(5, seed=2)))],
         {"reduction": "sum", "ignore_index": 2}, opset=13),
    Case("SoftmaxCrossEntropyLoss", [randn(4, 5), ints(4, high=5)], opset=13, outputs=2),
    Case("SoftmaxCrossEntropyLoss", [randn(4, 5, 2), ints(4, 2, high=5), C(np.abs(randn(5, seed=2)))],
         {"reduction": "none", "ignore_index": 1}, opset=13),
    # --- sampling ---
    *[Case("GridSample", [randn(1, 2, 4, 5), np.clip(randn(1, 3, 3, 2, seed=1) * 0.8, -1.2, 1.2)],
           {"mode": mode, "padding_mode": padding, "align_corners": align}, opset=16)
      for mode in ("bilinear", "nearest", "bicubic") for padding in ("zeros", "border", "reflection")
      for align in (0, 1) if (mode, padding) != ("bicubic", "border")],
    # (bicubic with border padding: ONNX's reference clamps the coordinate to the border before
    # taking the taps, onnxruntime and PyTorch clamp only the taps; the op follows ONNX)
    Case("GridSample", [randn(1, 2, 3, 4, 5), randn(1, 2, 2, 3, 3, seed=1) * 0.9], {"mode": "linear"}, opset=20),
    Case("AffineGrid", [randn(2, 2, 3), C(np.array([2, 3, 4, 5], I64))], {"align_corners": 1}, opset=20),
    Case("AffineGrid", [randn(1, 3, 4), C(np.array([1, 1, 2, 3, 4], I64))], opset=20),
    Case("Col2Im", [randn(1, 8, 18), C(np.array([4, 5], I64)), C(np.array([2, 2], I64))],
         {"pads": [0, 1, 0, 1]}, opset=18),
    Case("Col2Im", [randn(1, 4, 6), C(np.array([5, 3], I64)), C(np.array([2, 1], I64))],
         {"strides": [2, 1], "dilations": [2, 1]}, opset=18),
    # --- detection ---
    Case("RoiAlign", [IMG, C(np.array([[0.5, 1.0, 4.0, 5.5], [1.0, 0.0, 5.0, 6.0]], F32)), C(np.array([1, 0], I64))],
         {"output_height": 3, "output_width": 2, "sampling_ratio": 2, "spatial_scale": 0.8}, opset=16),
    Case("RoiAlign", [IMG, C(np.array([[0.5, 1.0, 4.0, 5.5]], F32)), C(np.array([1], I64))],
         {"output_height": 2, "output_width": 2, "mode": "max", "coordinate_transformation_mode": "output_half_pixel"},
         opset=16),
    Case("NonMaxSuppression", [np.array([[[0, 0, 1, 1], [0, 0.1, 1, 1.1], [0, 2, 1, 3], [0.5, 0.5, 1.5, 1.5]]], F32),
                               np.array([[[0.9, 0.95, 0.5, 0.6], [0.2, 0.1, 0.4, 0.3]]], F32),
                               C(np.array([3], I64)), C(np.array([0.4], F32)), C(np.array([0.15], F32))]),
    Case("NonMaxSuppression", [np.array([[[0.5, 0.5, 1, 1], [0.6, 0.5, 1, 1], [3, 3, 2, 2]]], F32),
                               np.array([[[0.9, 0.8, 0.7]]], F32), C(np.array([2], I64)), C(np.array([0.3], F32))],
         {"center_point_box": 1}),
    # --- state-space and linear-attention layers (opset 27) ---
    Case("CausalConvWithState", [randn(2, 4, 6), C(randn(4, 1, 3, seed=1)), C(randn(4, seed=2)),
                                 randn(2, 4, 2, seed=3)], {"activation": "silu"}, opset=27, outputs=2),
    *[Case("LinearAttention", [randn(2, 3, 8), randn(2, 3, 4, seed=1), randn(2, 3, 6, seed=2),
                               randn(2, 1, 4, 6, seed=3), -np.abs(randn(2, 3, 1, seed=4)), np.abs(randn(2, 3, 1, seed=5))],
           {"q_num_heads": 2, "kv_num_heads": 1, "update_rule": "gated_delta"}, opset=27, outputs=2)],
    Case("LinearAttention", [randn(1, 4, 6), randn(1, 4, 6, seed=1), randn(1, 4, 6, seed=2)],
         {"q_num_heads": 2, "kv_num_heads": 2, "update_rule": "linear", "scale": 0.5}, opset=27, outputs=2),
    # --- signal processing (the sizes are constants), KV caches, optionals, bits, determinants ---
    Case("HannWindow", [C(np.array(10, I64))], {"periodic": 0}, opset=17),
    Case("HammingWindow", [C(np.array(8, I64))], opset=17),
    Case("MelWeightMatrix", [C(np.array(8, I64)), C(np.array(16, I64)), C(np.array(8192, I64)), C(np.float32(0)),
                             C(np.float32(4096))], opset=17),
    Case("TensorScatter", [randn(2, 3, 8, 4), randn(2, 3, 2, 4, seed=1), C(np.array([1, 7], I64))],
         {"mode": "circular"}, opset=24),
    Case("OptionalHasElement", [randn(3)], opset=18), Case("OptionalGetElement", [randn(3)], opset=18),
    Case("BitCast", [randn(3, 4)], {"to": 6}, opset=26),
    Case("Det", [np.eye(3, dtype=F32) + 0.3 * randn(2, 3, 3)]),
    # --- recurrent layers ---
    *_rnn_cases(),
]


@pytest.mark.parametrize("case", CASES, ids=[f"{i}-{c.op_type}" for i, c in enumerate(CASES)])
def test_one_node_model_matches_onnxruntime(case):
    compare(case)


def test_batch_first_layout_is_the_transposed_sequence():
    # onnxruntime has no layout=1 recurrent kernels: the same layer on the transposed input
    from onnx_check import model_of, run_flopcount, run_ort

    x = randn(2, 5, 3)
    w, r, b = _rnn_weights("LSTM", 2, 4, 3, seed=11)
    attrs = {"hidden_size": 4, "direction": "bidirectional"}
    _, ours = run_flopcount(model_of(Case("LSTM", [x, w, r, b], {**attrs, "layout": 1}, outputs=3)), {"x0": x})
    theirs = run_ort(model_of(Case("LSTM", [x.transpose(1, 0, 2), w, r, b], attrs, outputs=3)),
                     {"x0": x.transpose(1, 0, 2)})
    np.testing.assert_allclose(ours[0].numpy(), theirs[0].transpose(2, 0, 1, 3), rtol=1e-4, atol=1e-5)
    for o, t in zip(ours[1:], theirs[1:]):
        np.testing.assert_allclose(o.numpy(), t.transpose(1, 0, 2), rtol=1e-4, atol=1e-5)
