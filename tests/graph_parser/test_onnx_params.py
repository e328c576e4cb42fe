"""Parameters per module in graphs imported from ONNX (tests/data/onnx): every parameter is
counted once, in the scope its name names or else in the deepest scope of the nodes reading it,
so per-module counts add up to the total and match the PyTorch model the file came from.

Exporters rewrite weights, and the expected numbers say how:
* equal tensors become one initializer (the first parameter's name is kept; zero biases and
  unit norm weights of later layers are read through it);
* TorchScript names the weights it transposes for MatMul ``onnx::MatMul_<n>`` and folds batch
  norm into the convolution before it (the conv gains a bias; zero, so shared between convs);
* dynamo's rewriter fuses batch norm into the conv under the norm's scope and drops all-zero
  Conv and Gemm biases.
"""

from __future__ import annotations

import os

import pytest

from data.make_onnx_fixtures import FIXTURES, HERE, build

import flopcount
import flopcount.runtime as rt

NAMES = sorted(FIXTURES)


def _report(name: str):
    inputs = FIXTURES[name][3]
    graph = rt.onnx.load(os.path.join(HERE, name), input_shapes={n: s for n, (s, _, _) in inputs.items()})
    return graph, flopcount.profile(graph)


@pytest.fixture(scope="module")
def reports():
    return {name: _report(name) for name in NAMES}


def _params(report) -> dict:
    return {r.name: r.params for r in report.rows if r.kind == "scope"}


@pytest.mark.parametrize("name", NAMES)
def test_each_parameter_is_counted_once_and_scopes_add_up(name, reports):
    graph, report = reports[name]
    scopes = [r for r in report.rows if r.kind == "scope"]
    total = sum(v.numel() for v in graph.parameters.values() if v.kind == "param")
    assert report.params == total
    assert sum(r.params_own for r in scopes) == total
    for row in scopes:
        children = [c for c in report.children(row.name) if c.kind == "scope"]
        assert row.params == row.params_own + sum(c.params for c in children), row.name


def test_torchscript_cnn_by_hand(reports):
    # conv weights Cout·Cin·k·k; each batch norm folded into its conv as a bias; the biases are
    # zero, so conv1 and the two convs of layer1.0 read one [8] tensor (deepest common scope:
    # the model) and the three convs of layer2.0 one [16] tensor (in layer2.0)
    params = _params(reports["cnn_torchscript_op13.onnx"][1])
    assert params["conv1"] == 8 * 3 * 7 * 7
    assert params["layer1.0.conv1"] == params["layer1.0.conv2"] == 8 * 8 * 3 * 3
    assert params["layer1.0"] == 2 * 8 * 8 * 3 * 3
    assert params["layer2.0.conv1"] == 16 * 8 * 3 * 3
    assert params["layer2.0.conv2"] == 16 * 16 * 3 * 3
    assert params["layer2.0.downsample.0"] == 16 * 8
    assert params["layer2.0"] == 16 * 8 * 9 + 16 * 16 * 9 + 16 * 8 + 16
    assert params["fc"] == 16 * 10 + 10
    assert params[""] == (8 * 3 * 49 + 8) + 2 * 8 * 8 * 9 + params["layer2.0"] + 170


def test_dynamo_cnn_by_hand(reports):
    # the rewriter fuses each batch norm into the conv before it, in the norm's scope, and drops
    # the zero biases: the conv weights follow the nodes that read them
    params = _params(reports["cnn_dynamo_op18.onnx"][1])
    assert params["bn1"] == 8 * 3 * 7 * 7
    assert params["layer1.0.bn1"] == params["layer1.0.bn2"] == 8 * 8 * 9
    assert params["layer2.0.bn1"] == 16 * 8 * 9 and params["layer2.0.bn2"] == 16 * 16 * 9
    assert params["layer2.0.downsample"] == 16 * 8
    assert params["fc"] == 170
    assert params[""] == 8 * 3 * 49 + 2 * 8 * 8 * 9 + 16 * 8 * 9 + 16 * 16 * 9 + 16 * 8 + 170


def test_torchscript_bert_by_hand(reports):
    # hidden 32, intermediate 64, vocabulary 100, 64 positions, 2 token types. All biases are
    # zero and LayerNorm weights one, so every layer reads the embeddings' LayerNorm tensors;
    # only the first layer's intermediate bias ([64], a shape no earlier tensor has) stays its own
    h, inner = 32, 64
    params = _params(reports["bert_torchscript_op17.onnx"][1])
    layer = 4 * h * h + h * inner + inner * h  # q, k, v, attention output; intermediate; output
    assert params["model.embeddings"] == 100 * h + 64 * h + 2 * h + 2 * h
    for i in (0, 1):
        assert params[f"model.encoder.layer.{i}.attention.self.query"] == h * h  # was on the root row
        assert params[f"model.encoder.layer.{i}.output.dense"] == inner * h
    assert params["model.encoder.layer.0.intermediate.dense"] == h * inner + inner
    assert params["model.encoder.layer.0"] == layer + inner
    assert params["model.encoder.layer.1"] == layer
    assert params["model.encoder"] == 2 * layer + inner
    assert params["model.pooler"] == h * h
    assert params[""] == params["model.embeddings"] + params["model.encoder"] + params["model.pooler"]


def test_tied_weight_follows_its_reader(reports):
    # dynamo names GPT-2's tied embedding ``model.lm_head.weight`` while only the token
    # embedding reads it; the head reads a transposed copy of its own
    params = _params(reports["gpt2_dynamo_op20.onnx"][1])
    assert params["model.transformer.wte"] == params["model.lm_head"] == 100 * 32


def _torch_counts(model) -> dict:
    """Per module path, the parameters an exporter keeps: equal tensors become one initializer
    under the first parameter's name, so only the first of each group counts."""
    first, kept = set(), set()
    for _, p in model.named_parameters():
        key = (tuple(p.shape), p.detach().numpy().tobytes())
        if key not in first:
            first.add(key)
            kept.add(id(p))
    return {path: sum(p.numel() for p in m.parameters() if id(p) in kept) for path, m in model.named_modules()}


# what each file holds beyond (+) or short of (-) the deduplicated PyTorch counts
_FILE_CHANGES = {
    # the tied head weight is stored a second time, transposed for the head's MatMul
    "gpt2": {"": 3200, "model": 3200},
    # the attention scale is a 1-element float initializer read by both blocks
    "vit_dynamo_op20.onnx": {"": 1, "layers": 1},
    # dynamo's rewriter drops the all-zero Gemm biases (c_attn 96, c_fc 128; the later layer's
    # equal biases were merged into these)
    "gpt2_dynamo_op20.onnx": {"": -224, "model": -224, "model.transformer": -224, "model.transformer.h": -224,
                              "model.transformer.h.0": -224, "model.transformer.h.0.attn": -96,
                              "model.transformer.h.0.attn.c_attn": -96, "model.transformer.h.0.mlp": -128,
                              "model.transformer.h.0.mlp.c_fc": -128},
}


@pytest.mark.parametrize("name", [n for n in NAMES if FIXTURES[n][0] != "cnn"])
def test_per_module_params_match_torch(name, reports):
    pytest.importorskip("torch")
    model_name = FIXTURES[name][0]
    if model_name in ("bert", "gpt2"):
        pytest.importorskip("transformers")
    expected = _torch_counts(build(model_name))
    for changes in (_FILE_CHANGES.get(model_name, {}), _FILE_CHANGES.get(name, {})):
        for path, delta in changes.items():
            expected[path] += delta
    params = _params(reports[name][1])
    wrong = {path: (params[path], count) for path, count in expected.items()
             if path in params and params[path] != count}
    assert not wrong, wrong
    assert sum(1 for path in expected if path in params) > 10
