"""The public API: get_model_complexity_info (ptflops/flowflops-compatible) and profile()."""

import io
import os

import pytest

import flopcount
import flopcount.runtime as rt
from flopcount import models

nn = rt.nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.relu = nn.ReLU()
        self.fc = nn.Linear(4 * 6 * 6, 5)

    def forward(self, x):
        y = self.relu(self.conv(x))
        return self.fc(y.flatten(1))


CONV = 1 * 36 * 9 * 3 * 4 + 4 * 36  # ptflops: per position prod(K)·Cin·Cout, + bias
RELU = 4 * 36
FC = 144 * 5 + 5
PARAMS = 4 * 3 * 9 + 4 + 144 * 5 + 5


def info(model=None, res=(1, 3, 8, 8), **kw):
    kw.setdefault("print_per_layer_stat", False)
    return flopcount.get_model_complexity_info(model or Net(), res, **kw)


def test_numbers_and_strings():
    assert info(as_strings=False) == (CONV + RELU + FC, PARAMS) == (4901, 837)
    assert info() == ("4.9 KMac", "837")
    assert info(flops_units="MMac", param_units="M", output_precision=4) == (
        f"{round((CONV + RELU + FC) / 1e6, 4)} MMac", f"{round(PARAMS / 1e6, 4)} M")


def test_default_convention_is_ptflops_and_flopcount_is_available():
    macs, _ = info(as_strings=False, convention="flopcount")
    assert macs == 36 * 9 * 3 * 4 + 144 * 5  # no bias, no activations as MACs


def test_trainable_parameters_only():
    net = Net()
    net.fc.requires_grad_(False)
    assert info(net, as_strings=False)[1] == 4 * 3 * 9 + 4


def test_per_layer_listing_like_ptflops():
    out = io.StringIO()
    info(print_per_layer_stat=True, ost=out)
    text = out.getvalue()
    total = CONV + RELU + FC
    assert text.splitlines()[0] == "Net("
    assert text.splitlines()[1].strip() == "837, 100.000% Params, 4.9 KMac, 100.000% MACs"
    assert (f"(conv): Conv2d(112, {100 * 112 / PARAMS:.3f}% Params, {round(CONV / 1e3, 2)} KMac, "
            f"{100 * CONV / total:.3f}% MACs, 3, 4, kernel_size=(3, 3)") in text
    assert "(relu): ReLU(0, 0.000% Params, 144 Mac" in text


def test_input_constructor_and_kwargs():
    class TwoInputs(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 2)

        def forward(self, x, scale=None):
            return self.fc(x) * scale

    def constructor(res):
        return {"x": rt.ones(*res), "scale": rt.ones(1)}

    macs, _ = info(TwoInputs(), (3, 4), input_constructor=constructor, as_strings=False)
    assert macs == 3 * (4 * 2 + 2)


def test_ignore_modules_and_custom_hooks():
    assert info(ignore_modules=[nn.ReLU], as_strings=False)[0] == CONV + FC

    def relu_hook(module, inputs, output):
        module.__flops__ += 3 * output.numel()  # a ptflops-style hook

    net = Net()
    macs, _ = info(net, custom_modules_hooks={nn.ReLU: relu_hook}, as_strings=False)
    assert macs == CONV + 3 * RELU + FC
    assert "__flops__" not in net.relu.__dict__


def test_graph_mode_and_verbose():
    assert info(mode="graph", as_strings=False)[0] == CONV + RELU + FC

    class Odd(nn.Module):
        def __init__(self):
            super().__init__()
            self.act = nn.Sigmoid()

        def forward(self, x):
            return self.act(x)

    out = io.StringIO()
    info(Odd(), (2, 3), verbose=True, ost=out)
    assert "Warning: module Sigmoid is treated as a zero-op." in out.getvalue()


def test_model_state_is_left_alone():
    net = Net().train()
    info(net)
    assert net.training and all(m.training for m in net.modules())


def test_profile_model_kinds(tmp_path):
    by_zoo = flopcount.profile("resnet18", device="meta")
    assert by_zoo.model == "resnet18" and by_zoo.macs == 1_814_073_344 and by_zoo.device == "meta"
    shaped = flopcount.profile("resnet18", input_shape=(2, 3, 64, 64), device="meta", mode="eager")
    assert shaped.input_shapes == [(2, 3, 64, 64)] and shaped.mode == "eager"
    tokens = flopcount.profile("gpt2", input_shape=(1, 16), device="meta")
    assert tokens.dtype == "float32" and tokens.input_shapes == [(1, 16)]
    path = os.path.join(tmp_path, "net.safetensors")
    rt.save(Net(), path, example_inputs=(rt.randn(1, 3, 8, 8),))
    assert flopcount.profile(path).macs == flopcount.profile(Net(), rt.randn(1, 3, 8, 8)).macs
    factory = tmp_path / "build.py"
    factory.write_text("import flopcount.runtime as rt\n"
                       "def make():\n    return rt.nn.Linear(4, 2)\n")
    assert flopcount.profile(f"{factory}:make", input_shape=(3, 4)).macs == 24


def test_profile_errors():
    with pytest.raises(flopcount.FlopcountError, match="unknown model 'resnet5'.*resnet50"):
        flopcount.profile("resnet5")
    with pytest.raises(flopcount.ModelFileError, match="no such file"):
        flopcount.profile("missing/model.onnx")
    with pytest.raises(ValueError, match="input_shape"):
        flopcount.profile(Net())
    with pytest.raises(ValueError, match="mode"):
        flopcount.profile(Net(), rt.randn(1, 3, 8, 8), mode="lazy")
    with pytest.raises(ValueError, match="convention"):
        flopcount.profile(Net(), rt.randn(1, 3, 8, 8), convention="thop")


def test_strict_lists_every_unsupported_module():
    class Odd(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Sigmoid(), nn.Tanh()

        def forward(self, x):
            return self.b(self.a(x) + self.a(x))

    report = flopcount.profile(Odd(), rt.randn(2, 3), mode="eager", convention="ptflops")
    assert [(u.name, u.calls) for u in report.unsupported] == [("Sigmoid", 2), ("Tanh", 1)]
    with pytest.raises(flopcount.UnsupportedOpError, match="Sigmoid.*Tanh"):
        flopcount.profile(Odd(), rt.randn(2, 3), mode="eager", convention="ptflops", strict=True)
    flopcount.profile(Odd(), rt.randn(2, 3), mode="eager", strict=True)  # flopcount prices every op


def test_public_names():
    assert flopcount.Report is flopcount.report.Report
    assert callable(flopcount.profile) and callable(flopcount.get_model_complexity_info)
    assert models.info("resnet50").params == 25_557_032


def test_a_lazy_graph_is_profiled_as_its_module():
    rt.manual_seed(0)
    net = rt.nn.Sequential(rt.nn.Linear(4, 3), rt.nn.ReLU(), rt.nn.Linear(3, 2))
    lazy = rt.compile(net)
    x = rt.randn(5, 4)
    lazy(x)                                     # compiled for x: profiling leaves it as it was
    for mode in ("graph", "eager"):
        report = flopcount.profile(lazy, x, mode=mode)
        # two Linear layers: 5 * (4 * 3 + 3 * 2) MACs, 3 * 4 + 3 + 3 * 2 + 2 parameters
        assert (report.macs, report.params) == (5 * (4 * 3 + 3 * 2), 23), mode
    macs, params = flopcount.get_model_complexity_info(lazy, (5, 4), print_per_layer_stat=False, as_strings=False)
    # ptflops' convention also counts each bias add and each ReLU output element
    assert (macs, params) == (5 * (4 * 3 + 3 + 3 + 3 * 2 + 2), 23)
    assert lazy.graph is not None and [n.op_name for n in lazy.graph.nodes][0] == "linear"
