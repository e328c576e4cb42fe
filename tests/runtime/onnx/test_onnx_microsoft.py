"""The com.microsoft ops of onnxruntime's transformer optimizer and LLM exports, each in a
one-node model built with onnx.helper, against onnxruntime's own kernels; their counts are the
runtime ops they are written with."""

from __future__ import annotations


import numpy as np
import pytest

from onnx_check import C, assert_same, randn, rng, run_ort

import flopcount
import flopcount.runtime as rt

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

MICROSOFT_OPS = {f"com.microsoft.{op}" for op in (
    "Gelu", "BiasGelu", "FastGelu", "QuickGelu", "SkipLayerNormalization", "SkipSimplifiedLayerNormalization",
    "SimplifiedLayerNormalization", "EmbedLayerNormalization", "RotaryEmbedding", "Attention", "MultiHeadAttention",
    "GroupQueryAttention", "MatMulNBits", "MatMulIntegerToFloat", "QOrderedMatMul")} | {"SimplifiedLayerNormalization"}


def ms_model(op_type: str, args: list, attrs: dict | None = None, outputs=(TensorProto.FLOAT,),
             domain: str = "com.microsoft"):
    """A one-node model of com.microsoft ``op_type``: arrays are graph inputs, ``C(array)``
    initializers, None omitted inputs; ``outputs`` the element types of its outputs, or
    (type, rank) where the rank is not the first input's (None: an output left empty)."""
    inputs, names, inits = [], [], []
    for i, arg in enumerate(args):
        if arg is None:
            names.append("")
        elif isinstance(arg, C):
            inits.append(numpy_helper.from_array(arg.array, f"c{i}"))
            names.append(f"c{i}")
        else:
            inputs.append(helper.make_tensor_value_info(f"x{i}", helper.np_dtype_to_tensor_dtype(arg.dtype),
                                                        list(arg.shape)))
            names.append(f"x{i}")
    while names and names[-1] == "":
        names.pop()
    outs = [f"y{i}" if t is not None else "" for i, t in enumerate(outputs)]
    node = helper.make_node(op_type, names, outs, name=f"/layer/{op_type}", domain=domain, **(attrs or {}))
    rank = np.ndim(args[0].array if isinstance(args[0], C) else args[0])
    declared = []
    for name, out in zip(outs, outputs):
        if name:  # element type and rank, every dim symbolic
            elem, n = out if isinstance(out, tuple) else (out, rank)
            declared.append(helper.make_tensor_value_info(name, elem, [f"{name}_{d}" for d in range(n)]))
    graph = helper.make_graph([node], "case", inputs, declared, inits)
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=8)


def check(op_type: str, args: list, attrs: dict | None = None, outputs=(TensorProto.FLOAT,),
          rtol: float = 1e-4, atol: float = 1e-5, domain: str = "com.microsoft"):
    """Run the node in flopcount and onnxruntime and compare every output; returns the graph and
    the feeds."""
    model = ms_model(op_type, args, attrs, outputs, domain)
    feeds = {f"x{i}": a for i, a in enumerate(args) if isinstance(a, np.ndarray)}
    graph = rt.onnx.load(model)
    ours = rt.GraphModule(graph)(*[rt.tensor(a) for a in feeds.values()])
    ours = list(ours) if isinstance(ours, tuple) else [ours]
    assert_same(ours, run_ort(model, feeds), rtol, atol, op_type)
    return graph, feeds


def macs(graph, feeds) -> int:
    return flopcount.profile(graph, *[rt.tensor(a) for a in feeds.values()]).macs


def test_gelu_forms():
    x = randn(2, 5, 8) * 2
    bias = randn(8, seed=1)
    check("Gelu", [x])
    check("BiasGelu", [x, C(bias)])
    check("FastGelu", [x])
    check("FastGelu", [x, C(bias)])
    check("QuickGelu", [x])
    check("QuickGelu", [x], {"alpha": 1.5})


def test_skip_layer_norms():
    x, skip = randn(2, 5, 16), randn(2, 5, 16, seed=1)
    gamma, beta, bias = randn(16, seed=2), randn(16, seed=3), randn(16, seed=4)
    check("SkipLayerNormalization", [x, skip, C(gamma), C(beta), C(bias)], {"epsilon": 1e-5},
          outputs=(TensorProto.FLOAT, None, None, TensorProto.FLOAT))
    check("SkipLayerNormalization", [x, randn(5, 16, seed=5), C(gamma)], {"epsilon": 1e-5})
    check("SkipSimplifiedLayerNormalization", [x, skip, C(gamma), C(bias)], {"epsilon": 1e-6},
          outputs=(TensorProto.FLOAT, None, None, TensorProto.FLOAT))
    # onnxruntime registers this one in ONNX's own domain, where Llama exports write it
    check("SimplifiedLayerNormalization", [x, C(gamma)], {"epsilon": 1e-6, "axis": -1}, domain="")


@pytest.mark.parametrize("interleaved", [0, 1])
def test_rotary_embedding(interleaved):
    b, s, n, h = 2, 5, 3, 8
    cos = np.cos(np.outer(np.arange(16), 1.0 / 10000 ** (np.arange(h // 2) * 2 / h))).astype(np.float32)
    sin = np.sin(np.outer(np.arange(16), 1.0 / 10000 ** (np.arange(h // 2) * 2 / h))).astype(np.float32)
    ids = rng(1).integers(0, 16, (b, s)).astype(np.int64)
    attrs = {"interleaved": interleaved, "num_heads": n}
    check("RotaryEmbedding", [randn(b, s, n * h), ids, C(cos), C(sin)], attrs)
    check("RotaryEmbedding", [randn(b, n, s, h), ids, C(cos), C(sin)], attrs)
    check("RotaryEmbedding", [randn(b, s, n * h), np.array([3], np.int64), C(cos), C(sin)], attrs)


@pytest.mark.parametrize("four_d", [False, True])
def test_rotary_embedding_with_packed_batching(four_d):
    """A ragged batch of sequences of 3, 1 and 4 tokens packed end to end into one row, each
    token's position within its own sequence in position_ids: the same as each sequence
    rotated on its own from position 0, and as onnxruntime computes it."""
    n, h, lengths = 2, 16, (3, 1, 4)
    cos, sin = _rope_tables(16, h)
    ids = np.concatenate([np.arange(length) for length in lengths]).astype(np.int64).reshape(1, -1)
    x = randn(1, n, 8, h) if four_d else randn(1, 8, n * h)
    attrs = {"is_packed_batching": 1, "num_heads": n, "rotary_embedding_dim": 8}
    graph, _ = check("RotaryEmbedding", [x, ids, C(cos[:, :4]), C(sin[:, :4])], attrs)
    packed = rt.GraphModule(graph)(rt.tensor(x), rt.tensor(ids)).numpy()
    axis, start = (2 if four_d else 1), 0
    for length in lengths:
        alone = np.take(x, np.arange(start, start + length), axis)
        one = rt.onnx.load(ms_model("RotaryEmbedding", [alone, np.array([0], np.int64), C(cos[:, :4]), C(sin[:, :4])],
                                    {"num_heads": n, "rotary_embedding_dim": 8}))
        expected = rt.GraphModule(one)(rt.tensor(alone), rt.tensor(np.array([0], np.int64))).numpy()
        np.testing.assert_allclose(np.take(packed, np.arange(start, start + length), axis), expected, rtol=1e-6)
        start += length
    with pytest.raises(rt.UnsupportedOpError, match=r"shape \(8, 32\)"):
        rt.onnx.load(ms_model("RotaryEmbedding", [randn(8, n * h), ids.reshape(-1), C(cos), C(sin)], attrs))


def _attention_macs(b, heads, lq, lk, head) -> int:
    return b * heads * lq * lk * 2 * head  # q kᵀ and p v


@pytest.mark.parametrize("unidirectional", [0, 1])
def test_attention(unidirectional):
    b, s, hidden, heads = 2, 6, 16, 4
    x, w, bias = randn(b, s, hidden), randn(hidden, 3 * hidden, seed=1) * 0.3, randn(3 * hidden, seed=2)
    attrs = {"num_heads": heads, "unidirectional": unidirectional}
    graph, feeds = check("Attention", [x, C(w), C(bias)], attrs)
    assert macs(graph, feeds) == b * s * hidden * 3 * hidden + _attention_macs(b, heads, s, s, hidden // heads)
    lengths = np.array([6, 4], np.int32)
    check("Attention", [x, C(w), C(bias), lengths], attrs)
    raw = np.ones((b, s), np.int32)
    raw[1, 3:] = 0
    check("Attention", [x, C(w), C(bias), raw], attrs)
    past = randn(2, b, heads, 3, hidden // heads, seed=3)
    graph, feeds = check("Attention", [x, C(w), C(bias), raw_past := np.ones((b, s + 3), np.int32), past], attrs,
                         outputs=(TensorProto.FLOAT, (TensorProto.FLOAT, 5)))
    assert raw_past.shape == (b, s + 3)
    assert macs(graph, feeds) == b * s * hidden * 3 * hidden + _attention_macs(b, heads, s, s + 3, hidden // heads)


def test_attention_with_bias_and_uneven_projections():
    b, s, hidden, heads = 1, 5, 12, 2
    x, w, bias = randn(b, s, hidden), randn(hidden, 12 + 12 + 8, seed=1) * 0.3, randn(32, seed=2)
    attention_bias = randn(1, heads, s, s, seed=3)
    check("Attention", [x, C(w), C(bias), None, None, attention_bias],
          {"num_heads": heads, "qkv_hidden_sizes": [12, 12, 8], "scale": 0.3})


def test_multi_head_attention():
    b, s, length, hidden, heads = 2, 4, 7, 16, 4
    q, k, v = randn(b, s, hidden), randn(b, length, hidden, seed=1), randn(b, length, hidden, seed=2)
    bias = randn(3 * hidden, seed=3)
    graph, feeds = check("MultiHeadAttention", [q, k, v, C(bias)], {"num_heads": heads})
    assert macs(graph, feeds) == _attention_macs(b, heads, s, length, hidden // heads)
    mask = np.ones((b, length), np.int32)
    mask[0, 5:] = 0
    check("MultiHeadAttention", [q, k, v, None, mask], {"num_heads": heads})
    head = hidden // heads
    past_k, past_v = randn(b, heads, 3, head, seed=4), randn(b, heads, 3, head, seed=5)
    self_k, self_v = randn(b, s, hidden, seed=6), randn(b, s, hidden, seed=7)
    check("MultiHeadAttention", [q, self_k, self_v, None, None, None, past_k, past_v],
          {"num_heads": heads, "unidirectional": 1},
          outputs=(TensorProto.FLOAT, (TensorProto.FLOAT, 4), (TensorProto.FLOAT, 4)))
    # keys and values already split into heads (a decoder's cross-attention cache)
    check("MultiHeadAttention", [q, randn(b, heads, length, head, seed=8), randn(b, heads, length, head, seed=9)],
          {"num_heads": heads})


def _rope_tables(positions: int, head: int):
    angles = np.outer(np.arange(positions), 1.0 / 10000 ** (np.arange(head // 2) * 2 / head))
    return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)


_GQA_OUTPUTS = (TensorProto.FLOAT, (TensorProto.FLOAT, 4), (TensorProto.FLOAT, 4))


@pytest.mark.parametrize("do_rotary", [0, 1])
def test_group_query_attention(do_rotary):
    """A prompt (no past), then one decode step over a past of 5, with 4 query heads sharing 2
    key/value heads; rotary positions and the causal mask from seqlens_k."""
    b, s, heads, kv_heads, head = 2, 5, 4, 2, 16  # (rotary kernels want a multiple of 16)
    cos, sin = _rope_tables(32, head)
    q, k, v = randn(b, s, heads * head), randn(b, s, kv_heads * head, seed=1), randn(b, s, kv_heads * head, seed=2)
    attrs = {"num_heads": heads, "kv_num_heads": kv_heads, "do_rotary": do_rotary}
    rotary = [C(cos), C(sin)] if do_rotary else []
    seqlens, total = np.full(b, s - 1, np.int32), C(np.array(s, np.int32))
    graph, feeds = check("GroupQueryAttention", [q, k, v, None, None, seqlens, total] + rotary, attrs,
                         outputs=_GQA_OUTPUTS)
    assert macs(graph, feeds) == _attention_macs(b, heads, s, s, head)
    past_k, past_v = randn(b, kv_heads, 5, head, seed=3), randn(b, kv_heads, 5, head, seed=4)
    q1, k1, v1 = (t[:, :1] for t in (q, k, v))
    check("GroupQueryAttention", [q1, k1, v1, past_k, past_v, np.full(b, 5, np.int32), C(np.array(6, np.int32))]
          + rotary, attrs, outputs=_GQA_OUTPUTS)
    # a ragged batch: the second sequence's past is 3 of the 5 rows, its new key goes at row 3
    check("GroupQueryAttention", [q1, k1, v1, past_k, past_v, np.array([5, 3], np.int32), C(np.array(6, np.int32))]
          + rotary, attrs, outputs=_GQA_OUTPUTS)
    packed = np.concatenate([q, k, v], -1)
    check("GroupQueryAttention", [packed, None, None, None, None, seqlens, total] + rotary, attrs,
          outputs=_GQA_OUTPUTS)


@pytest.mark.parametrize("attrs", [{}, {"do_rotary": 1}, {"do_rotary": 1, "rotary_interleaved": 1},
                                   {"local_window_size": 2}])
def test_group_query_attention_with_a_shared_buffer(attrs):
    """Past and present one buffer of 8 rows, each sequence's valid rows at its start
    (seqlens_k + 1 - S of them): the new keys written after them, zeros after those, as
    onnxruntime leaves them; the attention reads total_sequence_length keys and counts them,
    not the buffer's 8."""
    b, heads, kv_heads, head, rows = 2, 4, 2, 16, 8
    cos, sin = _rope_tables(32, head)
    attrs = {"num_heads": heads, "kv_num_heads": kv_heads, **attrs}
    rotary = [C(cos), C(sin)] if attrs.get("do_rotary") else []
    q, k, v = randn(b, 1, heads * head), randn(b, 1, kv_heads * head, seed=1), randn(b, 1, kv_heads * head, seed=2)
    past_k, past_v = randn(b, kv_heads, rows, head, seed=3), randn(b, kv_heads, rows, head, seed=4)
    graph, feeds = check("GroupQueryAttention", [q, k, v, past_k, past_v, np.array([4, 2], np.int32),
                                                 C(np.array(5, np.int32))] + rotary, attrs, outputs=_GQA_OUTPUTS)
    assert rt.GraphModule(graph)(*[rt.tensor(a) for a in feeds.values()])[1].shape == (b, kv_heads, rows, head)
    assert macs(graph, feeds) == _attention_macs(b, heads, 1, 5, head)
    # a prompt of 5 into the empty buffer, then 3 more tokens of one sequence (a later prompt)
    qs, ks, vs = randn(b, 5, heads * head, seed=5), randn(b, 5, kv_heads * head, seed=6), randn(b, 5, kv_heads * head,
                                                                                                  seed=7)
    graph, feeds = check("GroupQueryAttention", [qs, ks, vs, past_k, past_v, np.full(b, 4, np.int32),
                                                 C(np.array(5, np.int32))] + rotary, attrs, outputs=_GQA_OUTPUTS)
    assert macs(graph, feeds) == _attention_macs(b, heads, 5, 5, head)
    check("GroupQueryAttention", [qs[:1, :3], ks[:1, :3], vs[:1, :3], past_k[:1], past_v[:1], np.array([6], np.int32),
                                  C(np.array(7, np.int32))] + rotary, attrs, outputs=_GQA_OUTPUTS)


def test_group_query_attention_total_length_is_a_shape_input():
    """total_sequence_length decides how many keys are read and the present's length: a graph
    input carrying it is bound like a Reshape target, and a missing value is named."""
    b, heads, kv_heads, head = 1, 2, 1, 16
    q, k, v = randn(b, 1, heads * head), randn(b, 1, kv_heads * head, seed=1), randn(b, 1, kv_heads * head, seed=2)
    past_k, past_v = randn(b, kv_heads, 6, head, seed=3), randn(b, kv_heads, 6, head, seed=4)
    args = [q, k, v, past_k, past_v, np.array([3], np.int32), np.array(4, np.int32)]
    model = ms_model("GroupQueryAttention", args, {"num_heads": heads, "kv_num_heads": kv_heads},
                     outputs=_GQA_OUTPUTS)
    with pytest.raises(rt.ShapeError, match="'x6'"):
        rt.onnx.load(model)
    graph = rt.onnx.load(model, input_values={"x6": np.array(4, np.int32)})
    feeds = {f"x{i}": a for i, a in enumerate(args)}
    ours = rt.GraphModule(graph)(*[rt.tensor(a) for a in args[:6]])
    assert_same(list(ours), run_ort(model, feeds), 1e-4, 1e-5, "GroupQueryAttention")


def test_group_query_attention_lengths_from_the_attention_mask():
    """As LLM exports write it: total_sequence_length is the attention mask's width (shape
    arithmetic, known once the input shapes are) and seqlens_k its row sums less one (run
    time), here a decode step into a shared buffer of 8 with a padded second sequence."""
    b, heads, kv_heads, head, rows = 2, 4, 2, 16, 8
    mask = np.array([[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0]], np.int64)
    q, k, v = randn(b, 1, heads * head), randn(b, 1, kv_heads * head, seed=1), randn(b, 1, kv_heads * head, seed=2)
    past_k, past_v = randn(b, kv_heads, rows, head, seed=3), randn(b, kv_heads, rows, head, seed=4)
    feeds = {"q": q, "k": k, "v": v, "past_k": past_k, "past_v": past_v, "mask": mask}
    inputs = [helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(a.dtype), list(a.shape))
              for name, a in feeds.items()]
    nodes = [helper.make_node("ReduceSum", ["mask", "one"], ["sums"], keepdims=0),
             helper.make_node("Sub", ["sums", "one"], ["last"]),
             helper.make_node("Cast", ["last"], ["seqlens"], to=TensorProto.INT32),
             helper.make_node("Shape", ["mask"], ["shape"], start=1, end=2),
             helper.make_node("Squeeze", ["shape"], ["width"]),
             helper.make_node("Cast", ["width"], ["total"], to=TensorProto.INT32),
             helper.make_node("GroupQueryAttention", ["q", "k", "v", "past_k", "past_v", "seqlens", "total"],
                              ["y", "present_k", "present_v"], domain="com.microsoft", num_heads=heads,
                              kv_num_heads=kv_heads)]
    outputs = [helper.make_tensor_value_info(name, TensorProto.FLOAT, [f"{name}_{d}" for d in range(rank)])
               for name, rank in (("y", 3), ("present_k", 4), ("present_v", 4))]
    graph = helper.make_graph(nodes, "gqa", inputs, outputs, [numpy_helper.from_array(np.array([1], np.int64), "one")])
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    model = helper.make_model(graph, opset_imports=opsets, ir_version=8)
    ours = rt.onnx.load(model)
    assert_same(list(rt.GraphModule(ours)(*[rt.tensor(a) for a in feeds.values()])), run_ort(model, feeds), 1e-4, 1e-5, "GQA")
    assert macs(ours, feeds) == _attention_macs(b, heads, 1, 6, head)


def _pack_nbits(q: np.ndarray, block: int) -> np.ndarray:
    """(N, K) uint4 values -> MatMulNBits' (N, K / block, block / 2) bytes, low nibble first."""
    n, k = q.shape
    return (q[:, 0::2] | (q[:, 1::2] << 4)).astype(np.uint8).reshape(n, k // block, block // 2)


@pytest.mark.parametrize("zero_points", ["none", "packed", "float"])
def test_matmul_nbits(zero_points):
    m, k, n, block = 3, 64, 10, 16
    q = rng(1).integers(0, 16, (n, k)).astype(np.uint8)
    scales = (np.abs(randn(n, k // block, seed=2)) / 10 + 0.01).astype(np.float32)
    args = [randn(2, m, k), C(_pack_nbits(q, block)), C(scales.reshape(-1))]
    if zero_points == "none":
        args.append(None)
    elif zero_points == "packed":
        zp = rng(3).integers(0, 16, (n, k // block)).astype(np.uint8)
        args.append(C((zp[:, 0::2] | (zp[:, 1::2] << 4)).reshape(-1)))
    elif zero_points == "float":
        args.append(C(rng(3).uniform(0, 15, (n, k // block)).astype(np.float32).reshape(-1)))
    args += [None, C(randn(n, seed=4))]
    graph, feeds = check("MatMulNBits", args, {"K": k, "N": n, "bits": 4, "block_size": block}, atol=1e-4)
    report = flopcount.profile(graph, *[rt.tensor(a) for a in feeds.values()])
    # the GEMM, and with zero points their share: block sums of A times (zp·scale)ᵀ
    assert report.macs == 2 * m * k * n + (0 if zero_points == "none" else 2 * m * (k // block) * n)
    # the weight is a parameter of N·K 4-bit numbers: N·K / 2 bytes, as the file stores it
    assert report.memory.parameters["int4"] == n * k // 2
    assert report.params >= n * k


def _nbits_case(bits: int, zero_points: str, m=3, k=64, n=10, block=16):
    """A MatMulNBits case with act-order groups: (args, attributes, the dequantized (N, K) weight
    written from the contrib-op spec: column k of row n is (q − zp[n, g]) · scale[n, g] for
    g = g_idx[k], zp 2^(bits−1) when the file gives none, and the bias)."""
    top, blocks = 1 << bits, k // block
    q = rng(1).integers(0, top, (n, k)).astype(np.uint8)
    scales = (np.abs(randn(n, blocks, seed=2)) / 10 + 0.01).astype(np.float32)
    g_idx = rng(5).permutation(np.repeat(np.arange(blocks), block)).astype(np.int32)
    zp_values, zp = np.full((n, blocks), top // 2, np.float32), None
    if zero_points == "packed":  # uint8, two per byte for 4 bits
        z = rng(3).integers(0, top, (n, blocks)).astype(np.uint8)
        zp_values, zp = z.astype(np.float32), C(((z[:, 0::2] | (z[:, 1::2] << 4)) if bits == 4 else z).reshape(-1))
    elif zero_points == "float":
        zp_values = rng(3).uniform(0, top - 1, (n, blocks)).astype(np.float32)
        zp = C(zp_values.reshape(-1))
    packed = _pack_nbits(q, block) if bits == 4 else q.reshape(n, blocks, block)
    bias = randn(n, seed=4)
    args = [randn(2, m, k), C(packed), C(scales.reshape(-1)), zp, C(g_idx), C(bias)]
    weight = (q - zp_values[:, g_idx]) * scales[:, g_idx]
    return args, {"K": k, "N": n, "bits": bits, "block_size": block}, weight, bias


@pytest.mark.parametrize("bits, zero_points", [(4, "none"), (4, "float"), (4, "packed"), (8, "none"), (8, "packed")])
def test_matmul_nbits_with_act_order_groups(bits, zero_points):
    """g_idx (GPTQ's act-order: column k scaled by group g_idx[k]) reorders A's columns and the
    weight's into the blocks the scales describe. onnxruntime's CPU kernel is the reference for
    4 bits without zero points or with float ones; with uint8 zero points it ignores them under
    g_idx (its reorder path reads the zero point and keeps 8), and for 8 bits it refuses g_idx,
    so those are checked against the dequantized weight written from the spec."""
    args, attrs, weight, bias = _nbits_case(bits, zero_points)
    if bits == 4 and zero_points != "packed":
        graph, feeds = check("MatMulNBits", args, attrs, atol=1e-4)
    else:
        graph = rt.onnx.load(ms_model("MatMulNBits", args, attrs))
        feeds = {"x0": args[0]}
        np.testing.assert_allclose(rt.GraphModule(graph)(rt.tensor(args[0])).numpy(), args[0] @ weight.T + bias, rtol=1e-4, atol=1e-4)
    report = flopcount.profile(graph, *[rt.tensor(a) for a in feeds.values()])
    m, k, n, blocks = 3, 64, 10, 4
    assert report.macs == 2 * m * k * n + (0 if zero_points == "none" else 2 * m * blocks * n)
    assert report.memory.parameters[f"int{bits}"] == n * k * bits // 8


def test_matmul_nbits_refuses_uneven_groups():
    args, attrs, _, _ = _nbits_case(4, "none")
    args[4] = C(np.arange(64, dtype=np.int32) % 3)  # 3 groups of 22/21/21 where the scales say 4 of 16
    with pytest.raises(rt.UnsupportedOpError, match="g_idx") as err:
        rt.onnx.load(ms_model("MatMulNBits", args, attrs))
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_matmul_integer_to_float(dtype):
    info = np.iinfo(dtype)
    a = rng(0).integers(info.min, info.max + 1, (2, 5, 8)).astype(dtype)
    b = rng(1).integers(-128, 128, (8, 6)).astype(np.int8)
    scale_b = (np.abs(randn(6, seed=2)) / 50 + 0.001).astype(np.float32)
    graph, feeds = check("MatMulIntegerToFloat", [a, C(b), C(np.float32(0.02)), C(scale_b), C(dtype(3)), None,
                                                  C(randn(6, seed=3))])
    assert macs(graph, feeds) == 2 * 5 * 8 * 6


def _qordered_reference(a, b, scale_a, scale_b, scale_y, bias=None, c=None, scale_c=None):
    """QOrderedMatMul from the contrib-op spec: Y = alpha·A·B + bias + beta·C with alpha =
    scale_A·scale_B / scale_Y (scale_B per column or one), beta = scale_C / scale_Y, rounded half
    to even and saturated to int8."""
    y = (scale_a * scale_b / scale_y) * (a.astype(np.int64) @ b.astype(np.int64)).astype(np.float64)
    if c is not None:
        y = y + (scale_c / scale_y) * c
    if bias is not None:
        y = y + bias
    return np.clip(np.rint(y), -128, 127).astype(np.int8)


@pytest.mark.parametrize("per_column, with_c", [(False, False), (True, True)])
def test_qordered_matmul(per_column, with_c):
    """onnxruntime has no CPU kernel for QOrderedMatMul (only CUDA), so the reference is the
    spec written in numpy. B (K, N) is stored column by column (order_B = ORDER_COL): its
    buffer is Bᵀ's rows. The GEMM counts as int8 MACs and the weight as an int8 parameter."""
    m, k, n = 5, 12, 7
    a = rng(0).integers(-128, 128, (2, m, k)).astype(np.int8)
    b = rng(1).integers(-128, 128, (k, n)).astype(np.int8)
    stored = np.ascontiguousarray(b.T).reshape(k, n)  # the (K, N) tensor whose data runs down the columns
    scale_a, scale_y = np.float32(0.05), np.float32(2.5)
    scale_b = (np.abs(randn(n, seed=2)) / 20 + 0.01).astype(np.float32) if per_column else np.float32(0.03)
    bias = (randn(n, seed=3) * 4).astype(np.float32)
    c, scale_c = (rng(4).integers(-128, 128, (m, n)).astype(np.int8), np.float32(0.7)) if with_c else (None, None)
    args = [a, C(scale_a), C(stored), C(scale_b), C(scale_y), C(bias)]
    if with_c:
        args += [c, C(scale_c)]
    model = ms_model("QOrderedMatMul", args, {"order_A": 1, "order_B": 0, "order_Y": 1},
                     outputs=(TensorProto.INT8,))
    graph = rt.onnx.load(model)
    feeds = [a] + ([c] if with_c else [])
    ours = rt.GraphModule(graph)(*[rt.tensor(t) for t in feeds]).numpy()
    expected = _qordered_reference(a, b, scale_a, scale_b, scale_y, bias, c, scale_c)
    assert ours.dtype == np.int8
    np.testing.assert_array_equal(ours, expected)
    assert np.unique(expected).size > 20  # neither saturated nor all zero: the scales are exercised
    report = flopcount.profile(graph, *[rt.tensor(t) for t in feeds])
    assert report.totals["macs_by_dtype"] == {"int8": 2 * m * k * n}
    assert report.memory.parameters["int8"] == k * n


@pytest.mark.parametrize("orders, named", [
    ({"order_A": 2, "order_B": 3, "order_Y": 2}, "order_A=2 (ORDER_COL32)"),
    ({"order_A": 1, "order_B": 4, "order_Y": 1}, "order_B=4 (ORDER_COL32_2R_4R4)")])
def test_qordered_matmul_refuses_tiled_orders(orders, named):
    a = rng(0).integers(-128, 128, (1, 32, 32)).astype(np.int8)
    args = [a, C(np.float32(0.1)), C(np.ones((32, 32), np.int8)), C(np.float32(0.1)), C(np.float32(0.1))]
    with pytest.raises(rt.UnsupportedOpError, match=named.replace("(", r"\(").replace(")", r"\)")) as err:
        rt.onnx.load(ms_model("QOrderedMatMul", args, orders, outputs=(TensorProto.INT8,)))
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("name, model_type, fused", [
    ("bert_torchscript_op17", "bert", {"Attention", "EmbedLayerNormalization", "SkipLayerNormalization", "BiasGelu"}),
    ("gpt2_torchscript_op16", "gpt2", {"SkipLayerNormalization", "FastGelu"}),
])
def test_files_from_onnxruntimes_transformer_optimizer(tmp_path, name, model_type, fused):
    """The test fixtures fused by onnxruntime's transformer optimizer: outputs as onnxruntime
    runs the fused file, and the MACs of the file before fusion (the fused ops do the same
    GEMMs). The optimizer writes LayerNormalization into the opset-16 GPT-2, as onnxruntime
    registers it at every opset."""
    optimizer = pytest.importorskip("onnxruntime.transformers.optimizer")
    from pathlib import Path

    source = str(Path(__file__).parents[2] / "data" / "onnx" / f"{name}.onnx")
    fused_path = str(tmp_path / f"{name}_fused.onnx")
    optimizer.optimize_model(source, model_type=model_type, num_heads=4, hidden_size=32).save_model_to_file(fused_path)
    found = {n.op_type for n in onnx.load(fused_path).graph.node if n.domain == "com.microsoft"}
    assert found == fused
    ids = rng(0).integers(0, 100, (2, 7)).astype(np.int64)
    graph = rt.onnx.load(fused_path, input_shapes={"input_ids": (2, 7)})
    ours = rt.GraphModule(graph)(rt.tensor(ids))
    assert_same(list(ours) if isinstance(ours, tuple) else [ours], run_ort(fused_path, {"input_ids": ids}),
                1e-4, 1e-5, name)
    before, after = (flopcount.profile(p, input_shape=(2, 7)) for p in (source, fused_path))
    assert after.macs == before.macs
