"""Regenerate tests/data/onnx/: small models exported by PyTorch's two ONNX exporters.

    python tests/data/make_onnx_fixtures.py          # needs torch, transformers, onnxscript

Four tiny models, each exported with the TorchScript exporter (``dynamo=False``) and with the
dynamo exporter, with a dynamic batch (and sequence) axis:

* ``cnn``: a ResNet-like CNN (conv, batch norm, ReLU, max pool, two basic blocks, one with a
  strided downsample, global average pool, linear);
* ``vit``: a ViT-like encoder (patch conv, class token, position embedding, pre-norm blocks
  with ``nn.MultiheadAttention`` and a GELU MLP);
* ``bert``: transformers' ``BertModel`` with a tiny config;
* ``gpt2``: transformers' ``GPT2LMHeadModel`` with a tiny config.

``FIXTURES`` lists the files with their exporter, opset, inputs and symbolic dims; the tests
read it to know what each file should need. The test suite imports only ``FIXTURES`` and the
model classes (it runs without torch).
"""

from __future__ import annotations

import os
import sys

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "onnx")

# name -> (model, exporter, opset, {input: (example shape, dtype, symbolic dims by position)})
IMAGE = {"x": ((2, 3, 32, 32), "float32", {0: "batch"})}
TOKENS = {"input_ids": ((2, 8), "int64", {0: "batch", 1: "sequence"})}
FIXTURES = {
    "cnn_torchscript_op13.onnx": ("cnn", "torchscript", 13, IMAGE),
    "cnn_dynamo_op18.onnx": ("cnn", "dynamo", 18, IMAGE),
    "vit_torchscript_op14.onnx": ("vit", "torchscript", 14, IMAGE),
    "vit_dynamo_op20.onnx": ("vit", "dynamo", 20, IMAGE),
    "bert_torchscript_op17.onnx": ("bert", "torchscript", 17, TOKENS),
    "bert_dynamo_op18.onnx": ("bert", "dynamo", 18, TOKENS),
    "gpt2_torchscript_op16.onnx": ("gpt2", "torchscript", 16, TOKENS),
    "gpt2_dynamo_op20.onnx": ("gpt2", "dynamo", 20, TOKENS),
}
VOCAB = 100


def build(name: str):
    """The torch model ``name`` in eval mode (seeded, so the files are reproducible)."""
    import torch
    from torch import nn

    torch.manual_seed(0)

    class BasicBlock(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.relu = nn.ReLU()
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.downsample = None
            if stride != 1 or cin != cout:
                self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x):
            identity = x if self.downsample is None else self.downsample(x)
            out = self.relu(self.bn1(self.conv1(x)))
            return self.relu(self.bn2(self.conv2(out)) + identity)

    class TinyResNet(nn.Module):
        def __init__(self, classes=10):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 8, 7, 2, 3, bias=False)
            self.bn1 = nn.BatchNorm2d(8)
            self.relu = nn.ReLU()
            self.maxpool = nn.MaxPool2d(3, 2, 1)
            self.layer1 = nn.Sequential(BasicBlock(8, 8, 1))
            self.layer2 = nn.Sequential(BasicBlock(8, 16, 2))
            self.avgpool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(16, classes)

        def forward(self, x):
            x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
            x = self.layer2(self.layer1(x))
            return self.fc(torch.flatten(self.avgpool(x), 1))

    class EncoderBlock(nn.Module):
        def __init__(self, dim, heads, mlp):
            super().__init__()
            self.ln_1 = nn.LayerNorm(dim, eps=1e-6)
            self.self_attention = nn.MultiheadAttention(dim, heads, batch_first=True)
            self.ln_2 = nn.LayerNorm(dim, eps=1e-6)
            self.mlp = nn.Sequential(nn.Linear(dim, mlp), nn.GELU(), nn.Linear(mlp, dim))

        def forward(self, x):
            y = self.ln_1(x)
            y, _ = self.self_attention(y, y, y, need_weights=False)
            x = x + y
            return x + self.mlp(self.ln_2(x))

    class TinyViT(nn.Module):
        def __init__(self, image=32, patch=8, dim=32, heads=4, layers=2, classes=10):
            super().__init__()
            self.conv_proj = nn.Conv2d(3, dim, patch, patch)
            self.class_token = nn.Parameter(torch.randn(1, 1, dim) * 0.02)
            self.pos_embedding = nn.Parameter(torch.randn(1, (image // patch) ** 2 + 1, dim) * 0.02)
            self.layers = nn.Sequential(*[EncoderBlock(dim, heads, 2 * dim) for _ in range(layers)])
            self.ln = nn.LayerNorm(dim, eps=1e-6)
            self.head = nn.Linear(dim, classes)

        def forward(self, x):
            x = self.conv_proj(x).flatten(2).transpose(1, 2)
            token = self.class_token.expand(x.shape[0], -1, -1)
            x = torch.cat([token, x], dim=1) + self.pos_embedding
            return self.head(self.ln(self.layers(x))[:, 0])

    class TextModel(nn.Module):
        """transformers' model called with keywords and a tuple output (what the exporters
        trace); an all-ones attention mask keeps the TorchScript trace free of ``aten::diff``."""

        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, input_ids):
            mask = torch.ones_like(input_ids)
            return tuple(self.model(input_ids=input_ids, attention_mask=mask, return_dict=False))

    if name == "cnn":
        return TinyResNet().eval()
    if name == "vit":
        return TinyViT().eval()
    from transformers import BertConfig, BertModel, GPT2Config, GPT2LMHeadModel

    if name == "bert":
        config = BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                            intermediate_size=64, max_position_embeddings=64, attn_implementation="eager")
        return TextModel(BertModel(config)).eval()
    if name == "gpt2":
        config = GPT2Config(vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=4, n_positions=64,
                            use_cache=False, attn_implementation="eager")
        return TextModel(GPT2LMHeadModel(config)).eval()
    raise ValueError(f"unknown fixture model {name!r}")


def example_inputs(inputs: dict) -> tuple:
    import torch

    out = []
    for shape, dtype, _ in inputs.values():
        if dtype == "int64":
            out.append(torch.randint(0, VOCAB, shape, generator=torch.Generator().manual_seed(0)))
        else:
            out.append(torch.randn(shape, generator=torch.Generator().manual_seed(0)))
    return tuple(out)


def export(name: str, path: str) -> None:
    """Export fixture ``name`` (a key of FIXTURES) to ``path``."""
    import torch

    model_name, exporter, opset, inputs = FIXTURES[name]
    model = build(model_name)
    args = example_inputs(inputs)
    names = list(inputs)
    if exporter == "torchscript":
        torch.onnx.export(model, args, path, dynamo=False, opset_version=opset, input_names=names,
                          dynamic_axes={n: dict(dims) for n, (_, _, dims) in inputs.items()})
    else:
        shapes = tuple({axis: torch.export.Dim(dim, max=64) for axis, dim in dims.items()}
                       for _, _, dims in inputs.values())
        program = torch.onnx.export(model, args, dynamo=True, opset_version=opset, input_names=names,
                                    dynamic_shapes=shapes, verbose=False)
        program.save(path, external_data=False)


def main() -> None:
    os.makedirs(HERE, exist_ok=True)
    wanted = sys.argv[1:] or list(FIXTURES)
    for name in wanted:
        path = os.path.join(HERE, name)
        export(name, path)
        print(f"{name}: {os.path.getsize(path)} bytes")


if __name__ == "__main__":
    main()
