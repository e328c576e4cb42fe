"""Initializers that are precomputed tables (rotary caches and frequencies, masks, expanded
biases) are buffers, not parameters; weights stay parameters (runtime/onnx/tables.py)."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import flopcount  # noqa: E402
import flopcount.runtime as rt  # noqa: E402
from flopcount.runtime.onnx.tables import precomputed_tables  # noqa: E402

S, D, H = 6, 8, 2


def _attention_file() -> onnx.ModelProto:
    """One attention block written op by op, as exporters write it: rotary cos/sin caches
    gathered by position ids, a causal mask and an expanded relative bias added to the scores,
    a learned relative table gathered by its indices, a layer scale, a classifier bias."""
    f = np.float32
    rng = np.random.default_rng(0)
    inits = {
        "w_q": rng.standard_normal((D, D)).astype(f), "inv_freq": rng.random(D // 2).astype(f),
        "cos_cache": rng.random((16, D)).astype(f), "sin_cache": rng.random((16, D)).astype(f),
        "causal": np.triu(np.full((S, S), -1e4, f), 1), "rel_bias": rng.random((H, S, S)).astype(f),
        "rel_table": rng.random((2 * S - 1, H)).astype(f), "layer_scale": rng.random(D).astype(f),
        "embed": rng.random((50, D)).astype(f), "cls_bias": rng.random(S).astype(f),
        "positions": np.arange(S, dtype=np.int64).reshape(1, S),
        "rel_index": (np.arange(S)[:, None] - np.arange(S)[None, :] + S - 1).astype(np.int64),
        "shape_heads": np.array([1, S, H, D // H], np.int64), "perm": np.array([0, 2, 1, 3], np.int64),
    }
    n = helper.make_node
    nodes = [
        n("Gather", ["embed", "ids"], ["x"]),
        n("Cast", ["positions"], ["pos_f"], to=TensorProto.FLOAT),
        n("Unsqueeze", ["pos_f", "axis_last"], ["pos_col"]),
        n("Mul", ["pos_col", "inv_freq"], ["angles"]), n("Cos", ["angles"], ["cos_fresh"]),
        n("Gather", ["cos_cache", "positions"], ["cos"]), n("Gather", ["sin_cache", "positions"], ["sin"]),
        n("MatMul", ["x", "w_q"], ["q"]), n("Mul", ["q", "cos"], ["q_cos"]), n("Mul", ["q", "sin"], ["q_sin"]),
        n("Add", ["q_cos", "q_sin"], ["q_rot"]),
        n("Reshape", ["q_rot", "shape_heads"], ["q4"]), n("Transpose", ["q4"], ["qh"], perm=[0, 2, 1, 3]),
        n("Transpose", ["q4"], ["kt"], perm=[0, 2, 3, 1]),
        n("MatMul", ["qh", "kt"], ["scores"]),
        n("Add", ["scores", "causal"], ["masked"]), n("Add", ["masked", "rel_bias"], ["biased"]),
        n("Gather", ["rel_table", "rel_index"], ["rel_g"]), n("Transpose", ["rel_g"], ["rel_t"], perm=[2, 0, 1]),
        n("Add", ["biased", "rel_t"], ["scored"]),
        n("Softmax", ["scored"], ["probs"], axis=-1),
        n("ReduceMean", ["probs", "axes_12"], ["pooled"], keepdims=0),
        n("Mul", ["x", "layer_scale"], ["scaled"]),
        n("ReduceSum", ["scaled", "axis_last"], ["per_token"], keepdims=0),
        n("Add", ["per_token", "cls_bias"], ["logits"]), n("Softmax", ["logits"], ["y"], axis=-1),
        n("ReduceSum", ["cos_fresh", "axis_last"], ["fresh"], keepdims=0),
    ]
    inits["axis_last"] = np.array([-1], np.int64)
    inits["axes_12"] = np.array([1, 2], np.int64)
    graph = helper.make_graph(
        nodes, "block", [helper.make_tensor_value_info("ids", TensorProto.INT64, [1, S])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, S]),
         helper.make_tensor_value_info("pooled", TensorProto.FLOAT, [1, S]),
         helper.make_tensor_value_info("fresh", TensorProto.FLOAT, [1, S])],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8), inits


def test_tables_and_weights_told_apart_by_their_consumers():
    model, inits = _attention_file()
    onnx.checker.check_model(model)
    tables = {"inv_freq", "cos_cache", "sin_cache", "causal", "rel_bias"}
    assert precomputed_tables(model) == tables
    graph = rt.onnx.load(model)
    report = flopcount.profile(graph, rt.tensor(np.zeros((1, S), np.int64)))
    weights = {"w_q", "rel_table", "layer_scale", "embed", "cls_bias"}
    assert report.params == sum(inits[k].size for k in weights)
    assert report.memory.buffers["float32"] == 4 * sum(inits[k].size for k in tables)
    assert any("precomputed tables" in note and "cos_cache" in note for note in graph.notes)


def test_a_rotary_model_exported_by_pytorch_counts_its_parameters():
    """A PyTorch module whose rotary caches and causal mask are (persistent) buffers: the file
    stores them as initializers beside the weights; the count is the module's parameters."""
    torch = pytest.importorskip("torch")

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(D, D)
            angles = torch.arange(32.0)[:, None] * torch.rand(D)[None, :]
            self.register_buffer("cos_cached", angles.cos())
            self.register_buffer("sin_cached", angles.sin())
            self.register_buffer("mask", torch.triu(torch.full((32, 32), -1e4), 1))

        def forward(self, x, position_ids):
            q = self.proj(x)
            q = q * self.cos_cached[position_ids] + q.flip(-1) * self.sin_cached[position_ids]
            length = x.shape[1]
            scores = q @ q.transpose(1, 2) + self.mask[:length, :length]
            return scores.softmax(-1) @ q

    import io

    block, buffer = Block().eval(), io.BytesIO()
    x, ids = torch.randn(1, S, D), torch.arange(S)[None]
    with pytest.warns(DeprecationWarning):  # the TorchScript exporter: it stores buffers as initializers
        torch.onnx.export(block, (x, ids), buffer, dynamo=False, opset_version=17)
    model = onnx.load_from_string(buffer.getvalue())
    stored = sum(int(np.prod(t.dims)) for t in model.graph.initializer if t.data_type == TensorProto.FLOAT)
    params = sum(p.numel() for p in block.parameters())
    assert stored == params + 2 * 32 * D + S * S   # the caches and the mask (folded to its slice)
    report = flopcount.profile(rt.onnx.load(model), rt.tensor(x.numpy()), rt.tensor(ids.numpy()))
    assert report.params == params
