"""Training-step counts: backward = 2x forward for GEMM-class ops whose operands both need a
gradient, 1x for a first layer (its input needs none); checked on zoo models in both views and
against PyTorch's FlopCounterMode on the same architecture where torch is installed."""

import numpy as np
import pytest

import flopcount
import flopcount.runtime as rt
from flopcount import models

nn = rt.nn


def meta_model(name):
    with rt.meta():
        net = models.get(name)
    return net, models.example_input(name, device="meta")


@pytest.mark.parametrize("mode", ["eager", "graph"])
def test_cnn_backward_is_twice_forward_minus_the_first_layer(mode):
    net, x = meta_model("resnet18")
    report = flopcount.profile(net, x, mode=mode, backward=True)
    first = report.row("conv1").macs  # its input needs no gradient: the weight gradient only
    assert report.totals["backward_macs"] == 2 * report.macs - first
    assert report.totals["training_macs"] == 3 * report.macs - first


@pytest.mark.parametrize("name,first_layer", [("gpt2", None), ("vit_b_16", "conv_proj")])
def test_transformer_backward(name, first_layer):
    net, x = meta_model(name)
    report = flopcount.profile(net, x, mode="eager", backward=True)
    first = report.row(first_layer).macs if first_layer else 0  # gpt2 starts with embeddings
    assert report.totals["backward_macs"] == 2 * report.macs - first


torch = pytest.importorskip("torch")
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402


def _copy_weights(ours, theirs):
    state = {k: v.detach().numpy() for k, v in theirs.state_dict().items()}
    ours.load_state_dict(state)


def _torch_backward_flops(model, x):
    out = model(x)
    with FlopCounterMode(display=False) as counter:
        out.sum().backward()
    return counter.get_total_flops()


def _our_backward_gemm_flops(model, x):
    report = flopcount.profile(model, x, mode="eager", backward=True)
    # FlopCounterMode counts GEMM-class ops only, at 2 FLOPs per MAC
    return 2 * report.totals["backward_macs"], report


class TorchCNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.pool = torch.nn.MaxPool2d(2)
        self.conv2 = torch.nn.Conv2d(8, 4, 3, stride=2)
        self.head = torch.nn.Linear(4 * 2 * 2, 5)

    def forward(self, x):
        x = self.pool(torch.relu(self.bn(self.conv1(x))))
        x = torch.relu(self.conv2(x))
        return self.head(x.flatten(1))


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.pool = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(8, 4, 3, stride=2)
        self.head = nn.Linear(4 * 2 * 2, 5)

    def forward(self, x):
        x = self.pool(self.bn(self.conv1(x)).relu())
        x = self.conv2(x).relu()
        return self.head(x.flatten(1))


class TorchAttention(torch.nn.Module):
    def __init__(self, dim=16, heads=2):
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.proj = torch.nn.Linear(dim, dim)

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        scores = (q @ k.transpose(-2, -1)) * (d // self.heads) ** -0.5
        out = (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, n, d)
        return self.proj(out)


class Attention(nn.Module):
    def __init__(self, dim=16, heads=2):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, n, d = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        scores = (q @ k.transpose(-2, -1)) * (d // self.heads) ** -0.5
        out = (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, n, d)
        return self.proj(out)


@pytest.mark.parametrize("pair,shape", [((CNN, TorchCNN), (2, 3, 12, 12)), ((Attention, TorchAttention), (2, 5, 16))])
def test_backward_matches_flop_counter_mode(pair, shape):
    ours_cls, theirs_cls = pair
    theirs, ours = theirs_cls(), ours_cls()
    _copy_weights(ours, theirs)
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    expected = _torch_backward_flops(theirs.train(), torch.from_numpy(x))
    got, report = _our_backward_gemm_flops(ours, rt.tensor(x))
    assert got == expected
    # and the forward GEMM work agrees with FlopCounterMode's forward count
    with FlopCounterMode(display=False) as counter:
        theirs(torch.from_numpy(x))
    assert 2 * report.macs == counter.get_total_flops()


def test_grouped_conv_weight_gradient():
    # FlopCounterMode prices a grouped convolution's weight gradient as if ungrouped (g times
    # too much), so this one is checked by hand: every weight-gradient element (Cout, Cin/g, K)
    # sums N·prod(O) products
    conv = nn.Conv2d(8, 4, 3, stride=2, groups=2)
    report = flopcount.profile(conv, rt.randn(2, 8, 6, 6), mode="eager", backward=True)
    weight_grad = [o for o in report.by_op("backward") if o.op == "conv_weight_grad"]
    assert [o.macs for o in weight_grad] == [4 * 4 * 9 * (2 * 2 * 2)]
