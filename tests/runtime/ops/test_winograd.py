"""3x3 stride-1 convolutions by Winograd's F(2x2, 3x3): results against the direct convolution in
float64 and against PyTorch, where the algorithm is chosen, and the transformed weights kept for
read-only arrays only."""

import gc

import numpy as np
import pytest

import flopcount.runtime as rt
from flopcount.runtime import cpu_kernels
from flopcount.runtime.ops import _conv_kernels, _winograd

pytest.importorskip("numba")


@pytest.fixture
def every_size(monkeypatch):
    """Winograd's path for convs of any size (it otherwise waits for MIN_TILES 2x2 blocks)."""
    monkeypatch.setattr(_winograd, "MIN_TILES", 0)


def _direct(x, w, b, padding):
    """The direct (im2col) convolution, in float64."""
    with cpu_kernels.numpy_only():
        return _conv_kernels.conv_forward(np, x.astype(np.float64), w.astype(np.float64),
                                          None if b is None else b.astype(np.float64), (1, 1), padding, (1, 1), 1)


def _random_case(seed: int) -> dict:
    """Odd and even map sizes (a last 2x2 block cut by the border), padding 0-3 per side and per
    dim, 1-3 images, float32 or float64, with or without a bias."""
    rng = np.random.default_rng(seed)
    n, c, cout = int(rng.integers(1, 4)), int(rng.integers(_winograd.MIN_CHANNELS, 20)), int(rng.integers(1, 13))
    padding = (int(rng.integers(0, 4)), int(rng.integers(0, 4)))
    h, w = (int(rng.integers(max(1, 3 - 2 * p), 21)) for p in padding)
    dtype = [np.float32, np.float64][seed % 2]
    return dict(x=rng.standard_normal((n, c, h, w)).astype(dtype),
                w=rng.standard_normal((cout, c, 3, 3)).astype(dtype),
                b=rng.standard_normal(cout).astype(dtype) if seed % 3 else None, padding=padding)


@pytest.mark.parametrize("seed", range(30))
def test_winograd_is_within_the_rounding_of_the_direct_sum(every_size, seed):
    case = _random_case(seed)
    x, w, b, padding = case["x"], case["w"], case["b"], case["padding"]
    got = _winograd.conv2d(x, w, b, padding)
    want = _direct(x, w, b, padding)
    assert got.dtype == x.dtype and got.shape == want.shape
    # forward error bound of a sum of 9·C products, a few times over for the transforms:
    # |error| <= 16·eps·(|x| conv |w| + |b|)
    magnitude = _direct(np.abs(x), np.abs(w), None if b is None else np.abs(b), padding)
    bound = 16 * np.finfo(x.dtype).eps * magnitude
    assert np.all(np.abs(got - want) <= bound), np.max(np.abs(got - want) / bound)


@pytest.mark.parametrize("seed", range(4))
def test_conv2d_through_the_runtime_matches_torch(seed):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, 16, 14 + seed, 12)).astype(np.float32)
    w = rng.standard_normal((24, 16, 3, 3)).astype(np.float32)
    b = rng.standard_normal(24).astype(np.float32)
    assert _winograd.applies(np, x, w, (1, 1), (1, 1), 1) and 2 * 7 * 6 >= _winograd.MIN_TILES
    got = rt.nn.functional.conv2d(rt.from_numpy(x), rt.from_numpy(w), rt.from_numpy(b), 1, 1).numpy()
    want = torch.nn.functional.conv2d(torch.from_numpy(x).double(), torch.from_numpy(w).double(),
                                      torch.from_numpy(b).double(), padding=1).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


def test_gradients_through_winograd_match_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(7)
    x = rng.standard_normal((1, 8, 18, 16))
    w = rng.standard_normal((8, 8, 3, 3))
    g = rng.standard_normal((1, 8, 18, 16))
    xt, wt = rt.tensor(x, requires_grad=True), rt.tensor(w, requires_grad=True)
    (rt.nn.functional.conv2d(xt, wt, None, 1, 1) * rt.from_numpy(g)).sum().backward()
    xr, wr = torch.from_numpy(x).requires_grad_(), torch.from_numpy(w).requires_grad_()
    (torch.nn.functional.conv2d(xr, wr, None, 1, 1) * torch.from_numpy(g)).sum().backward()
    # the input gradient is a 3x3 stride-1 conv with the flipped kernel: Winograd's path too
    assert _winograd.applies(np, g, w, (1, 1), (1, 1), 1) and 9 * 8 >= _winograd.MIN_TILES
    np.testing.assert_allclose(xt.grad.numpy(), xr.grad.numpy(), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(wt.grad.numpy(), wr.grad.numpy(), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("geometry, channels, size", [
    (dict(stride=(2, 2)), 16, 32),  # strided
    (dict(dilation=(2, 2)), 16, 32),  # dilated
    (dict(groups=2), 16, 32),  # grouped
    ({}, _winograd.MIN_CHANNELS - 1, 32),  # GEMMs too thin
    ({}, 16, 8),  # too few 2x2 blocks: 4x4 of them
])
def test_the_direct_conv_runs_where_winograd_does_not_pay_or_apply(monkeypatch, geometry, channels, size):
    def fail(*args):
        raise AssertionError("Winograd's path ran")

    monkeypatch.setattr(_winograd, "_transformed", fail)
    groups = geometry.get("groups", 1)
    x = np.ones((1, channels, size, size), np.float32)
    w = np.ones((16, channels // groups, 3, 3), np.float32)
    y = _conv_kernels.conv_forward(np, x, w, None, geometry.get("stride", (1, 1)), (1, 1),
                                   geometry.get("dilation", (1, 1)), groups)
    assert y.shape[:2] == (1, 16)


def test_numpy_only_and_other_array_modules_take_the_direct_conv():
    x, w = np.ones((1, 16, 32, 32), np.float32), np.ones((16, 16, 3, 3), np.float32)
    assert _winograd.applies(np, x, w, (1, 1), (1, 1), 1)
    assert not _winograd.applies(object(), x, w, (1, 1), (1, 1), 1)
    with cpu_kernels.numpy_only():
        assert not _winograd.applies(np, x, w, (1, 1), (1, 1), 1)


def test_a_read_only_weight_is_transformed_once_and_forgotten_with_it(monkeypatch):
    calls = []
    transform = _winograd._transform
    monkeypatch.setattr(_winograd, "_transform", lambda *a: calls.append(1) or transform(*a))
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 16, 20, 20)).astype(np.float32)
    w = rng.standard_normal((8, 16, 3, 3)).astype(np.float32)
    first = _winograd.conv2d(x, w, None, (1, 1))
    _winograd.conv2d(x, w, None, (1, 1))
    assert len(calls) == 2  # writable: it may change between calls
    w.flags.writeable = False
    again = _winograd.conv2d(x, w, None, (1, 1))
    _winograd.conv2d(x, w, None, (1, 1))
    assert len(calls) == 3 and id(w) in _winograd._weights
    np.testing.assert_array_equal(again, first)
    del w
    gc.collect()
    assert not any(ref() is not None and ref().shape == (8, 16, 3, 3) for ref, _ in _winograd._weights.values())


def test_a_write_to_an_imported_weight_is_seen(tmp_path):
    """An imported model's weights are read-only views of the file: an in-place write copies the
    array first, so the kept transform of the old one is not used for the new values."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(5)
    w = rng.standard_normal((64, 16, 3, 3)).astype(np.float32)
    graph = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 20, 20])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(w, "w")])
    path = tmp_path / "conv.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    model = rt.GraphModule(rt.onnx.load(str(path)))
    x = rt.from_numpy(rng.standard_normal((1, 16, 20, 20)).astype(np.float32))
    before = model(x).numpy()
    weight = next(t for name, t in model.graph.tensors.items() if tuple(t.shape) == (64, 16, 3, 3))
    assert not weight.data.flags.writeable
    weight.mul_(2.0)
    np.testing.assert_allclose(model(x).numpy(), 2 * before, rtol=1e-6, atol=1e-5)
