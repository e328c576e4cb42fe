"""Capturing PyTorch modules: the torch.export path, the recorded fallback where export refuses,
ops without a converter, models on torch's meta device, weights shared without copying, the
model left as it was, and the one-line error without torch."""

from __future__ import annotations

import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import flopcount  # noqa: E402
import flopcount.runtime as rt  # noqa: E402
from flopcount.runtime.errors import FlopcountError, UnsupportedOpError  # noqa: E402

from torch_check import compare  # noqa: E402


class Gated(torch.nn.Module):
    """Python control flow on a tensor's value: torch.export refuses it."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)
        self.bn = torch.nn.BatchNorm1d(4)

    def forward(self, x):
        if x.sum() > 0:
            return self.bn(self.fc(x)).relu()
        return self.fc(x)


def test_export_refusal_falls_back_to_recording_one_run():
    model = Gated().eval()
    x = torch.ones(3, 4)          # sum > 0: the branch with the batch norm
    graph = rt.torch.to_graph(model, x)
    assert len(graph.notes) == 1
    note = graph.notes[0]
    assert note.startswith("torch.export could not capture Gated (")
    assert "recording the ATen ops of one run" in note and "specialized to their values" in note
    # recorded below autograd: Linear arrives as t + addmm, converted to a linear on a view
    counted = [(n.op_name, n.scope) for n in graph.nodes if n.op_name != "permute"]
    assert counted == [("linear", "fc"), ("batch_norm", "bn"), ("relu", "")]
    compare(graph, model, (x,))
    assert flopcount.profile(graph).macs == 3 * 4 * 4


def test_recorded_training_run_leaves_the_model_as_it_was():
    model = Gated().train()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    graph = rt.torch.to_graph(model, torch.ones(3, 4), train=True)
    assert graph.notes and model.training
    for name, value in model.state_dict().items():   # running statistics put back
        assert torch.equal(value, before[name]), name
    model.eval()
    rt.torch.to_graph(model, torch.ones(3, 4))
    assert not model.training


class KthValue(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, x):
        values, _ = torch.kthvalue(self.fc(x).unsqueeze(-1).expand(2, 8, 3), 2, dim=1)
        return values * 2


def test_an_op_without_converter_is_listed_counted_zero_and_run_by_torch():
    model, x = KthValue().eval(), torch.randn(2, 8)
    graph = rt.torch.to_graph(model, x)
    assert graph.notes == ["no flopcount mapping for aten.kthvalue (1 call): counted as 0 and run by torch"]
    compare(graph, model, (x,))   # the fallback op runs torch's kernel
    report = flopcount.profile(model, x)
    assert [str(u) for u in report.unsupported] == ["op aten.kthvalue (1 call: 'kthvalue')"]   # with its node names
    assert report.notes == graph.notes
    assert report.macs == 2 * 8 * 8 and report.flops == 2 * 2 * 8 * 8 + 2 * 8 + 2 * 3   # linear + bias, mul
    with pytest.raises(UnsupportedOpError, match=r"aten.kthvalue \(1 call: 'kthvalue'\)"):
        flopcount.profile(model, x, strict=True)


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.head = torch.nn.Linear(8, 5)

    def forward(self, x):
        y = self.bn(self.conv(x)).relu().mean((2, 3))
        return self.head(y)


def test_a_model_on_the_meta_device_counts_like_the_real_one():
    real = flopcount.profile(Block(), torch.randn(2, 3, 16, 16))
    with torch.device("meta"):
        model = Block()
    graph = rt.torch.to_graph(model, torch.empty(2, 3, 16, 16, device="meta"))
    assert graph.device.type == "meta" and all(graph.tensors[n].data is None for n in graph.parameters)
    report = flopcount.profile(model, input_shape=(2, 3, 16, 16))
    assert report.device == "meta"
    assert (report.macs, report.flops, report.params) == (real.macs, real.flops, real.params)
    assert report.macs == 2 * 8 * 16 * 16 * 3 * 9 + 2 * 8 * 5


def test_weights_are_the_torch_tensors_memory():
    model = Block().eval()
    graph = rt.torch.to_graph(model, torch.randn(1, 3, 8, 8))
    for name, param in model.state_dict().items():
        if param.dtype.is_floating_point:
            assert np.shares_memory(graph.tensors[name].data, param.numpy()), name


def test_latency_runs_the_converted_graph():
    model = Block().eval()
    report = flopcount.profile(model, torch.randn(1, 3, 16, 16), latency=True, repeat=2)
    assert report.latency_ms > 0 and report.row("conv").latency_ms > 0
    assert report.row("conv").type == "Conv2d" and report.row("head").type == "Linear"


def test_without_torch_the_error_is_one_line(monkeypatch):
    from flopcount.runtime.torch.capture import require_torch

    monkeypatch.setitem(sys.modules, "torch", None)   # import torch then fails, as where it is not installed
    with pytest.raises(FlopcountError, match=r"^PyTorch models need torch: pip install 'flopcount\[torch\]'$"):
        require_torch()


def test_keyword_inputs_and_integer_inputs():
    class Embed(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(50, 6)
            self.fc = torch.nn.Linear(6, 2)

        def forward(self, input_ids, scale=None):
            return self.fc(self.emb(input_ids)) * (1 if scale is None else scale)

    model = Embed().eval()
    report = flopcount.profile(model, input_ids=torch.randint(0, 50, (2, 7)))
    assert report.macs == 2 * 7 * 6 * 2
    # shapes alone make float inputs, which an embedding refuses: torch's message, in one line
    with pytest.raises(FlopcountError, match=r"^Embed: capturing the PyTorch model failed \(RuntimeError: "
                                             r"Expected tensor for argument #1 'indices'[^\n]*$"):
        flopcount.profile(model, input_shape={"input_ids": (2, 7)})
