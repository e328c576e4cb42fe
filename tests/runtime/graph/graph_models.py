"""Small models the graph tests share: an MLP, a CNN with batch norm, an attention block; and
the comparison of a graph's result with eager."""

import numpy as np

import flopcount.runtime as rt

nn = rt.nn
F = rt.nn.functional


class MLP(nn.Module):
    def __init__(self, d_in=4, hidden=8, d_out=3):
        super().__init__()
        self.fc1 = nn.Linear(d_in, hidden)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(hidden, d_out)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x))) * 2.0


class Block(nn.Module):
    """conv -> bn -> relu -> conv -> bn, plus the input (a ResNet basic block)."""

    def __init__(self, c):
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(c)

    def forward(self, x):
        y = self.bn1(self.conv1(x)).relu()
        return (self.bn2(self.conv2(y)) + x).relu()


class SmallCNN(nn.Module):
    def __init__(self, classes=5):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.block = Block(8)
        self.fc = nn.Linear(8, classes)

    def forward(self, x):
        y = self.bn(self.stem(x)).relu()
        y = self.block(y)
        return self.fc(y.mean((2, 3)))


class Attention(nn.Module):
    """Multi-head self-attention written with matmul and softmax, plus a residual and a norm."""

    def __init__(self, dim=16, heads=2):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm = nn.LayerNorm(dim)

    def forward(self, x):
        b, t, d = x.shape
        h = self.heads
        q, k, v = rt.unbind(self.qkv(x).reshape(b, t, 3, h, d // h).permute(2, 0, 3, 1, 4), 0)
        scores = (q @ k.transpose(-2, -1)) * (d // h) ** -0.5
        mask = rt.ones(t, t).triu(1) == 1
        attn = scores.masked_fill(mask, float("-inf")).softmax(-1)
        y = (attn @ v).transpose(1, 2).reshape(b, t, d)
        return self.norm(x + self.proj(y))


def randomize_norms(model) -> None:
    """Give batch norms non-trivial running statistics and affine parameters."""
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            c = m.num_features
            m.running_mean.copy_(rt.randn(c) * 0.1)
            m.running_var.copy_(rt.rand(c) + 0.5)
            m.weight.data[...] = (rt.rand(c) + 0.5).numpy()
            m.bias.data[...] = rt.randn(c).numpy()


# each model above with an input shape, for the tests that check all of them
SMALL_MODELS = [(MLP, (2, 4)), (lambda: SmallCNN().eval(), (2, 3, 16, 16)), (Attention, (2, 5, 16))]


def assert_close(a, b, tol: float = 1e-5) -> None:
    """Two runtime tensors equal within ``tol``, relative and absolute."""
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=tol, atol=tol)
