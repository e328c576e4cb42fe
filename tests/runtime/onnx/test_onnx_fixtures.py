"""Files written by PyTorch's ONNX exporters (tests/data/onnx, made by
tests/data/make_onnx_fixtures.py): each imports, needs input_shapes for its symbolic dims,
gives onnxruntime's outputs, keeps module scopes and the attention matmuls. A last test exports
on the fly when torch is installed."""

from __future__ import annotations

import os

import numpy as np
import pytest

from onnx_check import assert_same, run_ort

from data.make_onnx_fixtures import FIXTURES, HERE, VOCAB

import flopcount.runtime as rt

NAMES = sorted(FIXTURES)
# a batch and sequence other than the export's (2, 8): the dims really are symbolic
BATCH, SEQUENCE = 3, 5


def _shapes(inputs: dict) -> dict:
    return {name: (BATCH, SEQUENCE) if dtype == "int64" else (BATCH,) + shape[1:]
            for name, (shape, dtype, _) in inputs.items()}


def _feeds(inputs: dict) -> dict:
    rng = np.random.default_rng(0)
    return {name: rng.integers(0, VOCAB, shape).astype(np.int64) if inputs[name][1] == "int64"
            else rng.standard_normal(shape).astype(np.float32) for name, shape in _shapes(inputs).items()}


@pytest.fixture(scope="module")
def imported():
    return {name: rt.onnx.load(os.path.join(HERE, name), input_shapes=_shapes(FIXTURES[name][3])) for name in NAMES}


@pytest.mark.parametrize("name", NAMES)
def test_symbolic_dims_need_input_shapes(name):
    _, _, _, inputs = FIXTURES[name]
    dims = [str(d) for d in next(iter(inputs.values()))[2].values()]
    with pytest.raises(rt.ShapeError, match=rf"input '{next(iter(inputs))}' has symbolic dims \[.*{dims[0]}.*\]; "
                                            rf"pass input_shapes"):
        rt.onnx.load(os.path.join(HERE, name))


@pytest.mark.parametrize("name", NAMES)
def test_outputs_match_onnxruntime(name, imported):
    import onnx

    inputs = FIXTURES[name][3]
    feeds = _feeds(inputs)
    graph = imported[name]
    out = rt.GraphModule(graph)(*[rt.tensor(v) for v in feeds.values()])
    ours = list(out) if isinstance(out, tuple) else [out]
    theirs = run_ort(onnx.load(os.path.join(HERE, name)), feeds)
    assert_same(ours, theirs, rtol=1e-4, atol=1e-5, what=name)


# module paths each model has (the prefix "model." is the fixture's wrapper around transformers)
SCOPES = {"cnn": ["layer1.0", "layer2.0", "fc"], "vit": ["conv_proj", "layers.0.self_attention", "layers.1.mlp", "head"],
          "bert": ["model.embeddings", "model.encoder.layer.1.attention.self", "model.pooler"],
          "gpt2": ["model.transformer.h.0.attn", "model.transformer.h.1.mlp", "model.lm_head"]}


@pytest.mark.parametrize("name", NAMES)
def test_scopes_come_from_the_module_tree(name, imported):
    scopes = {n.scope for n in imported[name].nodes}
    for wanted in SCOPES[FIXTURES[name][0]]:
        assert any(s == wanted or s.startswith(wanted + ".") for s in scopes), (wanted, sorted(scopes))


def test_dynamo_metadata_gives_module_types(imported):
    types = {n.module_type for n in imported["bert_dynamo_op18.onnx"].nodes}
    assert {"Linear", "LayerNorm", "BertSelfAttention", "Embedding"} <= types


@pytest.mark.parametrize("name", [n for n in NAMES if FIXTURES[n][0] != "cnn"])
def test_attention_keeps_both_matmuls(name, imported):
    # two layers: per layer QKᵀ (B, H, L, D) @ (B, H, D, L) and PV (B, H, L, L) @ (B, H, L, D)
    graph = imported[name]
    heads, dim = 4, 8
    length = SEQUENCE if FIXTURES[name][0] in ("bert", "gpt2") else 17  # 16 patches + the class token
    attention = [n for n in graph.nodes if n.op_name == "matmul" and all(v.kind == "node" for v in n.inputs)]
    assert len(attention) == 4
    per_matmul = BATCH * heads * length * length * dim
    assert [n.cost().macs for n in attention] == [per_matmul] * 4


@pytest.mark.parametrize("name", ["cnn_torchscript_op13.onnx", "cnn_dynamo_op18.onnx"])
def test_cnn_macs_by_hand(name, imported):
    # conv1 7x7/2 -> 16x16x8; max pool -> 8x8; layer1: two 3x3 8->8; layer2: 3x3/2 8->16, 3x3 16->16,
    # 1x1/2 downsample; fc 16->10 (the dynamo exporter folds batch norm into the convs: same MACs)
    per_image = (16 * 16 * 8 * 3 * 49 + 2 * 8 * 8 * 8 * 8 * 9 + 4 * 4 * 16 * 8 * 9 + 4 * 4 * 16 * 16 * 9
                 + 4 * 4 * 16 * 8 + 16 * 10)
    assert imported[name].cost().macs == BATCH * per_image


@pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::FutureWarning")  # torch's own notices
@pytest.mark.parametrize("dynamo", [False, True], ids=["torchscript", "dynamo"])
def test_export_with_torch_on_the_fly(tmp_path, dynamo):
    torch = pytest.importorskip("torch")
    if dynamo:
        pytest.importorskip("onnxscript")  # the dynamo exporter's dependency (a dev tool here)
    from data.make_onnx_fixtures import build

    model = build("cnn")
    x = torch.randn(2, 3, 24, 20)
    path = os.path.join(tmp_path, "cnn.onnx")
    if dynamo:
        dims = {0: torch.export.Dim("n"), 2: torch.export.Dim("h", min=8), 3: torch.export.Dim("w", min=8)}
        torch.onnx.export(model, (x,), dynamo=True, input_names=["image"], dynamic_shapes=(dims,),
                          verbose=False).save(path)
    else:
        torch.onnx.export(model, (x,), path, dynamo=False, opset_version=17, input_names=["image"],
                          dynamic_axes={"image": {0: "n", 2: "h", 3: "w"}})
    with pytest.raises(rt.ShapeError, match=r"input 'image' has symbolic dims \['n', 'h', 'w'\]"):
        rt.onnx.load(path)
    graph = rt.onnx.load(path, input_shapes=[(2, 3, 24, 20)])
    with torch.no_grad():
        expected = model(x).numpy()
    np.testing.assert_allclose(rt.GraphModule(graph)(rt.tensor(x.numpy())).numpy(), expected, rtol=1e-4, atol=1e-5)
