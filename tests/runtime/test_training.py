"""End to end: a small CNN learns a synthetic task with Adam (loss falls at least 10x)."""

import numpy as np
import pytest

import flopcount.runtime as rt
from flopcount.runtime import nn
from flopcount.runtime.nn import functional as F


def quadrant_images(n: int, seed: int):
    """8x8 noisy images with one bright 2x2 spot; the label is the quadrant holding it."""
    rng = np.random.default_rng(seed)
    images = 0.3 * rng.standard_normal((n, 1, 8, 8)).astype(np.float32)
    labels = rng.integers(0, 4, n)
    for i, label in enumerate(labels):
        row = 4 * (label // 2) + rng.integers(0, 3)
        col = 4 * (label % 2) + rng.integers(0, 3)
        images[i, 0, row:row + 2, col:col + 2] += 2.0
    return rt.tensor(images), rt.tensor(labels)


def small_cnn(lib=nn, conv_bias: bool = True):
    """The same network from ``rt.nn`` or ``torch.nn``."""
    return lib.Sequential(
        lib.Conv2d(1, 8, 3, padding=1, bias=conv_bias), lib.BatchNorm2d(8), lib.ReLU(), lib.MaxPool2d(2),
        lib.Conv2d(8, 16, 3, padding=1, bias=conv_bias), lib.BatchNorm2d(16), lib.ReLU(), lib.MaxPool2d(2),
        lib.Flatten(), lib.Linear(16 * 2 * 2, 4),
    )


def test_small_cnn_learns_with_adam():
    images, labels = quadrant_images(64, seed=0)
    model = small_cnn()
    opt = rt.optim.Adam(model.parameters(), lr=0.02)
    losses = []
    for _ in range(60):
        opt.zero_grad()
        loss = F.cross_entropy(model(images), labels)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0] / 10, f"loss went from {losses[0]:.3f} to {losses[-1]:.3f}"

    # it learned the task, not the batch: held-out images in eval mode (running statistics)
    model.eval()
    test_images, test_labels = quadrant_images(64, seed=1)
    with rt.no_grad():
        predicted = model(test_images).argmax(-1)
    assert (predicted == test_labels).numpy().mean() >= 0.9
    assert model[1].num_batches_tracked.item() == 60


def test_training_steps_match_torch():
    torch = pytest.importorskip("torch")
    images, labels = quadrant_images(16, seed=2)
    # no conv bias: before batch norm its gradient is zero, and Adam would follow rounding noise
    ours = small_cnn(nn, conv_bias=False)
    theirs = small_cnn(torch.nn, conv_bias=False)
    ours.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})
    opt_ours = rt.optim.Adam(ours.parameters(), lr=0.01)
    opt_theirs = torch.optim.Adam(theirs.parameters(), lr=0.01)
    x, y = torch.tensor(images.numpy()), torch.tensor(labels.numpy())
    for _ in range(5):
        opt_ours.zero_grad()
        opt_theirs.zero_grad()
        loss_ours = F.cross_entropy(ours(images), labels)
        loss_theirs = torch.nn.functional.cross_entropy(theirs(x), y)
        loss_ours.backward()
        loss_theirs.backward()
        opt_ours.step()
        opt_theirs.step()
        np.testing.assert_allclose(loss_ours.item(), loss_theirs.item(), rtol=1e-4)
    for k, v in theirs.state_dict().items():
        np.testing.assert_allclose(ours.state_dict()[k].numpy(), v.numpy(), rtol=1e-3, atol=1e-5, err_msg=k)
