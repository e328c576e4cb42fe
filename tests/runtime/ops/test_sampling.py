"""Upsampling and interpolate: forward against PyTorch's index formulas written out per output
element, backward as the adjoint, FLOPs by COUNTING.md, and PyTorch itself (float32)."""

import math
import warnings

import numpy as np
import pytest

import flopcount.runtime as rt
from flopcount.runtime.ops.sampling import UpsampleBilinearBackward, UpsampleNearestBackward
from opcheck import Example, check_op, forward_backward_with_torch, linear_adjoint, op_costs, randn, run_example

F = rt.nn.functional


def ref_nearest(x, out):
    """out[j] = x[min(floor(j·in/out), in − 1)] along every dim."""
    y = np.zeros(x.shape[:2] + tuple(out))
    for o in np.ndindex(*out):
        src = tuple(min(int(math.floor(j * n / m)), n - 1) for j, n, m in zip(o, x.shape[2:], out))
        y[(slice(None), slice(None)) + o] = x[(slice(None), slice(None)) + src]
    return y


def _taps(j, n, m, align_corners):
    if align_corners:
        src = j * (n - 1) / (m - 1) if m > 1 else 0.0
    else:
        src = max((j + 0.5) * n / m - 0.5, 0.0)
    i0 = int(math.floor(src))
    i1 = min(i0 + 1, n - 1)
    w1 = src - i0
    return ((i0, 1 - w1), (i1, w1))


def ref_linear(x, out, align_corners=False):
    """The 2^d-tap weighted sum of each output element (PyTorch's linear/bilinear/trilinear)."""
    y = np.zeros(x.shape[:2] + tuple(out))
    for o in np.ndindex(*out):
        per_dim = [_taps(j, n, m, align_corners) for j, n, m in zip(o, x.shape[2:], out)]
        for combo in np.ndindex(*(2,) * len(out)):
            src = tuple(per_dim[d][c][0] for d, c in enumerate(combo))
            weight = np.prod([per_dim[d][c][1] for d, c in enumerate(combo)])
            y[(slice(None), slice(None)) + o] += weight * x[(slice(None), slice(None)) + src]
    return y


EXAMPLES = {
    # a gather: 0 FLOPs
    "upsample_nearest": Example(lambda x: F.interpolate(x, size=(5, 8)), [randn(2, 3, 3, 4)],
                                lambda x: ref_nearest(x, (5, 8)), macs=0, flops=0),
    # one add per output gradient element
    "upsample_nearest_backward": Example(
        lambda g: rt.apply(UpsampleNearestBackward, g, input_size=(3, 4), scales=None, exact=False),
        [randn(2, 3, 5, 8)], lambda g: linear_adjoint(lambda x: ref_nearest(x, (5, 8)), (2, 3, 3, 4), g),
        flops=2 * 3 * 5 * 8),
    # 7 FLOPs per output element (4 multiplies, 3 adds)
    "upsample_bilinear": Example(lambda x: F.interpolate(x, size=(5, 7), mode="bilinear"), [randn(2, 3, 3, 4)],
                                 lambda x: ref_linear(x, (5, 7)), macs=0, flops=7 * 2 * 3 * 5 * 7),
    # 4 multiplies and 4 scattered adds per output gradient element
    "upsample_bilinear_backward": Example(
        lambda g: rt.apply(UpsampleBilinearBackward, g, input_size=(3, 4), scales=None, align_corners=False),
        [randn(2, 3, 5, 7)], lambda g: linear_adjoint(lambda x: ref_linear(x, (5, 7)), (2, 3, 3, 4), g),
        flops=8 * 2 * 3 * 5 * 7),
}


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example(name):
    run_example(name, EXAMPLES[name])


@pytest.mark.parametrize("xs,kw,reference", [
    ((1, 2, 4), dict(scale_factor=2.5), lambda x: ref_nearest(x, (10,))),
    ((1, 2, 3, 3, 2), dict(size=(4, 2, 5)), lambda x: ref_nearest(x, (4, 2, 5))),
    ((1, 2, 6, 5), dict(size=(3, 2)), lambda x: ref_nearest(x, (3, 2))),               # downsampling
    ((1, 2, 4), dict(size=7, mode="linear"), lambda x: ref_linear(x, (7,))),
    ((1, 2, 3, 4), dict(size=(6, 3), mode="bilinear", align_corners=True),
     lambda x: ref_linear(x, (6, 3), align_corners=True)),
    ((1, 1, 2, 3, 2), dict(scale_factor=2, mode="trilinear"), lambda x: ref_linear(x, (4, 6, 4))),
    ((1, 2, 6, 4), dict(size=(3, 2), mode="area"), lambda x: x.reshape(1, 2, 3, 2, 2, 2).mean(axis=(3, 5))),
])
def test_interpolate_modes(xs, kw, reference):
    check_op(lambda x: F.interpolate(x, **kw), [randn(*xs)], reference)


def test_nearest_exact_rounds_to_the_nearest_source():
    x = rt.tensor([[[0.0, 1.0, 2.0]]])
    # source = floor((j + 0.5) · 3/5): 0.3, 0.9, 1.5, 2.1, 2.7
    assert F.interpolate(x, size=5, mode="nearest-exact").tolist() == [[[0.0, 0.0, 1.0, 2.0, 2.0]]]
    assert F.interpolate(x, size=5, mode="nearest").tolist() == [[[0.0, 0.0, 1.0, 1.0, 2.0]]]


def test_scale_factor_is_used_for_the_source_index_unless_recomputed():
    x = rt.tensor([[[0.0, 1.0, 2.0, 3.0, 4.0]]])
    # 5·1.7 = 8.5 -> 8 outputs; source floor(j / 1.7) vs floor(j · 5/8)
    assert F.interpolate(x, scale_factor=1.7).tolist() == [[[0.0, 0.0, 1.0, 1.0, 2.0, 2.0, 3.0, 4.0]]]
    assert F.interpolate(x, scale_factor=1.7, recompute_scale_factor=True).tolist() == \
        [[[0.0, 0.0, 1.0, 1.0, 2.0, 3.0, 3.0, 4.0]]]


def test_deprecated_aliases():
    x = rt.tensor(randn(1, 2, 3, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        near = F.upsample_nearest(x, scale_factor=2)
        bil = F.upsample_bilinear(x, size=(5, 5))
        up = F.upsample(x, size=(4, 4), mode="bilinear")
    np.testing.assert_allclose(near.numpy(), ref_nearest(x.numpy().astype(np.float64), (6, 6)), rtol=1e-6)
    np.testing.assert_allclose(bil.numpy(), ref_linear(x.numpy().astype(np.float64), (5, 5), True), rtol=1e-5)
    np.testing.assert_allclose(up.numpy(), ref_linear(x.numpy().astype(np.float64), (4, 4)), rtol=1e-5)


def test_trilinear_cost_counts_eight_taps():
    x = rt.randn(1, 2, 2, 2, 2)
    cost = op_costs(lambda: F.interpolate(x, scale_factor=2, mode="trilinear"))["upsample_bilinear"]
    assert cost.flops == 15 * 2 * 4 * 4 * 4  # 8 multiplies + 7 adds per output element


def test_meta_shapes():
    x = rt.randn(2, 3, 7, 9).to("meta")
    assert F.interpolate(x, scale_factor=2.5).shape == (2, 3, 17, 22)
    assert F.interpolate(x, size=(4, 4), mode="bilinear").shape == (2, 3, 4, 4)


def test_bad_arguments():
    x = rt.ones(1, 1, 4, 4)
    with pytest.raises(ValueError, match="only one of size or scale_factor"):
        F.interpolate(x, size=2, scale_factor=2)
    with pytest.raises(ValueError, match="either size or scale_factor"):
        F.interpolate(x)
    with pytest.raises(NotImplementedError, match="Got 4D input, but linear mode needs 3D input"):
        F.interpolate(x, size=2, mode="linear")
    with pytest.raises(ValueError, match="align_corners option can only be set"):
        F.interpolate(x, size=2, align_corners=True)
    with pytest.raises(rt.UnsupportedOpError, match="mode 'bicubic' is not supported"):
        F.interpolate(x, size=2, mode="bicubic")
    with pytest.raises(ValueError, match="same number of spatial dimensions"):
        F.interpolate(x, size=(2, 2, 2))


@pytest.mark.parametrize("nd,mode", [(1, "nearest"), (2, "nearest"), (3, "nearest"), (1, "linear"),
                                     (2, "bilinear"), (3, "trilinear"), (2, "nearest-exact"), (2, "area")])
def test_matches_torch_forward_and_backward(nd, mode):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(nd)
    x = rng.standard_normal((2, 3) + tuple(int(v) for v in rng.integers(3, 6, nd))).astype(np.float32)
    cases = [dict(size=tuple(int(v) for v in rng.integers(2, 11, nd))), dict(scale_factor=1.5),
             dict(scale_factor=tuple(float(v) for v in rng.choice([0.6, 2.0, 2.7], nd)))]
    if mode in ("linear", "bilinear", "trilinear"):
        cases += [dict(c, align_corners=True) for c in cases]
    for kw in cases:
        (y, ty), (gx, tgx) = forward_backward_with_torch(
            lambda a: F.interpolate(a, mode=mode, **kw),
            lambda a: torch.nn.functional.interpolate(a, mode=mode, **kw), [x], rng)
        np.testing.assert_allclose(y, ty, rtol=1e-5, atol=1e-6, err_msg=str(kw))
        np.testing.assert_allclose(gx, tgx, rtol=1e-5, atol=1e-5, err_msg=str(kw))
