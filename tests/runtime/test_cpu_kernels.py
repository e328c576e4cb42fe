"""The compiled CPU kernels (numba) against the numpy kernels they replace and against PyTorch,
on random shapes; every op check runs once on each path (``numpy_only`` forces the numpy one)."""

import math
import os
import subprocess
import sys

import numpy as np
import pytest

import flopcount.runtime as rt
from flopcount.runtime import cpu_kernels
from flopcount.runtime.ops import _conv_kernels, _erf
from flopcount.runtime.ops.activations import _stable_sigmoid
from avx2_only import run_without_avx512, run_without_vector_fma

pytest.importorskip("numba")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(params=["compiled", "numpy"])
def path(request):
    """Runs the test once with the compiled kernels and once with the numpy ones."""
    if request.param == "numpy":
        with cpu_kernels.numpy_only():
            yield request.param
    else:
        assert cpu_kernels.enabled()
        yield request.param


def _random_depthwise(seed: int) -> dict:
    """A depthwise conv of random geometry: odd sizes, strides 1-3, padding, dilation, a
    channel multiplier, 1-d or 2-d, float32 or float64."""
    rng = np.random.default_rng(seed)
    nd = int(rng.integers(1, 3))
    kernel = tuple(int(k) for k in rng.integers(1, 8, nd))
    stride = tuple(int(s) for s in rng.integers(1, 4, nd))
    dilation = tuple(int(d) for d in rng.integers(1, 3, nd))
    padding = tuple(int(rng.integers(0, k)) for k in kernel)
    size = tuple(int(d * (k - 1) + 1 + rng.integers(0, 13)) for k, d in zip(kernel, dilation))
    channels, mult, n = int(rng.integers(1, 6)), int(rng.integers(1, 3)), int(rng.integers(1, 3))
    dtype = [np.float32, np.float64][int(rng.integers(0, 2))]
    return dict(x=rng.standard_normal((n, channels) + size).astype(dtype),
                w=rng.standard_normal((channels * mult, 1) + kernel).astype(dtype),
                b=rng.standard_normal(channels * mult).astype(dtype) if rng.integers(0, 2) else None,
                stride=stride, padding=padding, dilation=dilation, groups=channels)


@pytest.mark.parametrize("seed", range(40))
def test_depthwise_conv_matches_torch(path, seed):
    torch = pytest.importorskip("torch")
    case = _random_depthwise(seed)
    x, w, b = case["x"], case["w"], case["b"]
    conv = torch.nn.functional.conv1d if x.ndim == 3 else torch.nn.functional.conv2d
    want = conv(torch.from_numpy(x), torch.from_numpy(w), None if b is None else torch.from_numpy(b),
                case["stride"], case["padding"], case["dilation"], case["groups"]).numpy()
    got = rt.nn.functional.conv1d if x.ndim == 3 else rt.nn.functional.conv2d
    out = got(rt.from_numpy(x), rt.from_numpy(w), None if b is None else rt.from_numpy(b), case["stride"],
              case["padding"], case["dilation"], case["groups"]).numpy()
    assert out.dtype == x.dtype and out.shape == want.shape
    tol = 1e-5 if x.dtype == np.float32 else 1e-12
    np.testing.assert_allclose(out, want, rtol=tol, atol=tol * 10)


@pytest.mark.parametrize("seed", range(40, 60))
def test_compiled_depthwise_conv_matches_the_numpy_kernel(seed):
    case = _random_depthwise(seed)
    args = (case["x"], case["w"], case["b"], case["stride"], case["padding"], case["dilation"], case["groups"])
    compiled = _conv_kernels.conv_forward(np, *args)
    with cpu_kernels.numpy_only():
        reference = _conv_kernels.conv_forward(np, *args)
    tol = 1e-5 if case["x"].dtype == np.float32 else 1e-12
    np.testing.assert_allclose(compiled, reference, rtol=tol, atol=tol * 10)


def test_depthwise_conv_reads_strided_inputs():
    x = np.random.default_rng(0).standard_normal((2, 8, 13, 11)).astype(np.float32)
    w = np.random.default_rng(1).standard_normal((4, 1, 3, 3)).astype(np.float32)
    view = x[:, ::2]  # every other channel: not contiguous
    compiled = _conv_kernels.conv_forward(np, view, w, None, (2, 1), (1, 1), (1, 1), 4)
    with cpu_kernels.numpy_only():
        reference = _conv_kernels.conv_forward(np, view, w, None, (2, 1), (1, 1), (1, 1), 4)
    np.testing.assert_allclose(compiled, reference, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kernel,stride,dilation", [((3, 3), 1, 1), ((5, 5), 1, 1), ((7, 7), 1, 1), ((3, 7), 1, 1),
                                                     ((7, 1), 1, 1), ((5, 2), 1, 1), ((3, 3), 2, 1), ((7, 7), 1, 2),
                                                     ((4, 4), 1, 1)])
@pytest.mark.parametrize("size", [(1, 1), (2, 40), (13, 9), (14, 14), (23, 37)])
def test_float32_depthwise_blocks_within_the_rounding_bound(kernel, stride, dilation, size):
    # the register blocks: stride-1 kernels 3, 5 or 7 rows high, and any other geometry by
    # kernel position; maps not a whole number of 7-row blocks or of vectors wide, a channel
    # multiplier, two images. Each output is a sum of taps + 1 float32 terms, so it is within
    # (taps + 1)·2^-24 of the sum of their magnitudes of the exact (float64) result.
    rng = np.random.default_rng(sum(kernel) * 100 + size[0] * 7 + size[1])
    channels, mult = 3, 2
    pad = tuple(dilation * (k // 2) for k in kernel)  # "same" padding: every map size is valid
    x = rng.standard_normal((2, channels) + size).astype(np.float32)
    w = rng.standard_normal((channels * mult, 1) + kernel).astype(np.float32)
    b = rng.standard_normal(channels * mult).astype(np.float32)
    geometry = ((stride,) * 2, pad, (dilation,) * 2, channels)
    got = _conv_kernels.conv_forward(np, x, w, b, *geometry)
    with cpu_kernels.numpy_only():
        exact = _conv_kernels.conv_forward(np, x.astype(np.float64), w.astype(np.float64), b.astype(np.float64),
                                           *geometry)
        magnitude = _conv_kernels.conv_forward(np, np.abs(x.astype(np.float64)), np.abs(w.astype(np.float64)),
                                               np.abs(b.astype(np.float64)), *geometry)
    assert got.dtype == np.float32 and got.shape == exact.shape
    taps = kernel[0] * kernel[1]
    assert np.all(np.abs(got - exact) <= (taps + 1) * 2.0 ** -24 * magnitude + 1e-30)


@pytest.mark.parametrize("seed", range(24))
def test_narrow_input_conv_within_the_rounding_bound(seed):
    # dense convs of 1-4 input channels (stems) by the compiled kernel: random geometry,
    # output channels not a whole number of 4-channel blocks, maps not of whole row blocks or
    # vectors; each output is a sum of C·kh·kw + 1 float32 terms, so it is within that many
    # 2^-24 of the sum of their magnitudes of the exact (float64) result
    rng = np.random.default_rng(seed)
    kernel = tuple(int(k) for k in rng.integers(1, 8, 2))
    stride = tuple(int(s) for s in rng.integers(1, 4, 2))
    dilation = tuple(int(d) for d in rng.integers(1, 3, 2))
    padding = tuple(int(rng.integers(0, k)) for k in kernel)
    size = tuple(int(d * (k - 1) + 1 + rng.integers(0, 40)) for k, d in zip(kernel, dilation))
    channels, out_channels = int(rng.integers(1, 5)), int(rng.integers(1, 11))
    x = rng.standard_normal((int(rng.integers(1, 3)), channels) + size).astype(np.float32)
    w = rng.standard_normal((out_channels, channels) + kernel).astype(np.float32)
    b = rng.standard_normal(out_channels).astype(np.float32) if seed % 2 else None
    geometry = (stride, padding, dilation, 1)
    assert cpu_kernels.kernel("narrow_conv").applies(x, w, 1)
    got = _conv_kernels.conv_forward(np, x, w, b, *geometry)

    def f64(a):
        return None if a is None else a.astype(np.float64)

    with cpu_kernels.numpy_only():
        exact = _conv_kernels.conv_forward(np, f64(x), f64(w), f64(b), *geometry)
        magnitude = _conv_kernels.conv_forward(np, np.abs(f64(x)), np.abs(f64(w)), None if b is None else np.abs(f64(b)),
                                               *geometry)
    assert got.dtype == np.float32 and got.shape == exact.shape
    terms = channels * kernel[0] * kernel[1] + 1
    assert np.all(np.abs(got - exact) <= terms * 2.0 ** -24 * magnitude + 1e-30)


@pytest.mark.parametrize("length", [1, 7, 128, 197, 1000])
def test_compiled_softmax_within_its_error_and_numpys_nan_rows(length):
    # rows of the last axis: within (4 + n)·eps of the exact softmax (its exp within 2 ulp, a
    # float32 sum of n terms, one division; below float32's normal range, 0), on a transposed
    # (strided) input; rows with NaN, +inf, all -inf are NaN where numpy's kernel gives NaN,
    # -inf entries give 0, and a row with one entry 120 above the rest gives 1 and tiny values
    from flopcount.runtime.registry import get_op

    softmax = get_op("softmax")._kernel_by_device["cpu"]
    rng = np.random.default_rng(length)
    x = (rng.standard_normal((length, 9)) * 6).astype(np.float32).T  # 9 rows of ``length``
    x[1, 0] = np.nan
    x[2, -1] = np.inf
    x[3, :] = -np.inf
    x[4, : max(1, length // 2)] = -np.inf
    x[5, 0] += 120
    got = softmax(np, x, dim=-1)
    with cpu_kernels.numpy_only(), np.errstate(all="ignore"):
        reference = softmax(np, x, dim=-1)
    assert got.dtype == np.float32 and got.shape == x.shape
    np.testing.assert_array_equal(np.isnan(got), np.isnan(reference))
    finite = ~np.isnan(reference).any(axis=-1)
    x64 = x[finite].astype(np.float64)
    with np.errstate(all="ignore"):
        exact = np.exp(x64 - x64.max(axis=-1, keepdims=True))
    exact /= exact.sum(axis=-1, keepdims=True)
    tiny = np.finfo(np.float32).tiny
    assert np.all(np.abs(got[finite] - exact) <= (4 + length) * 2.0 ** -23 * exact + tiny)
    assert np.all(got[4][: max(1, length // 2)] == 0) or length == 1


# every float32 regime: zero, the small-|x| side, both signs past the clamp at 4, huge, inf, NaN
SPECIAL = np.array([0.0, -0.0, 1e-30, -1e-8, 0.5, -0.5, 1.0, 3.9, -3.9, 4.0, 4.5, -4.5, 10.0, -10.0, 87.0, -87.0,
                    -88.0, -104.0, 1e30, -1e30, np.inf, -np.inf, np.nan], dtype=np.float32)


def _float32_inputs(seed: int, size: int = 10_007) -> np.ndarray:
    # odd length (no whole vector blocks), spread over [-12, 12] with SPECIAL mixed in
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(size) * 4).astype(np.float32)
    x[rng.choice(size, SPECIAL.size, replace=False)] = SPECIAL
    return x


def _ulp(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Distance in float32 units in the last place (same-sign values; NaN where either is)."""
    ia, ib = (np.where(v < 0, -(v.view(np.int32) & 0x7FFFFFFF), v.view(np.int32)).astype(np.int64) for v in (a, b))
    return np.abs(ia - ib)


@pytest.mark.parametrize("name", ["erf", "gelu"])
def test_compiled_erf_is_within_one_ulp_of_the_numpy_kernel(name):
    # the same float64 arithmetic with fused multiply-adds: rounded to float32, one unit in the
    # last place apart at most (NaN where NaN), and the same bits nearly everywhere; GELU's
    # 1/2 + erf/2 cancels for x below -5, where the float64 sums' own rounding (|x|·2^-52)
    # is more than a unit of the tiny result (both kernels are off there by erf's 7e-8)
    x = np.concatenate([_float32_inputs(1), _float32_inputs(2, 1_000_003)]).reshape(-1, 1)[::3]  # a strided view
    run = _erf.erf if name == "erf" else _erf.gelu_erf
    compiled = run(np, x)
    with cpu_kernels.numpy_only():
        reference = run(np, x)
    assert compiled.dtype == np.float32 and compiled.shape == x.shape
    nan = np.isnan(reference)
    np.testing.assert_array_equal(np.isnan(compiled), nan)
    got, want, at = compiled[~nan], reference[~nan], x[~nan]
    bound = np.spacing(np.abs(want)).astype(np.float64) + np.abs(at.astype(np.float64)) * 2.0 ** -50
    same = got == want  # infinities too
    with np.errstate(invalid="ignore"):  # inf - inf where both are inf
        assert np.all(same | (np.abs(got.astype(np.float64) - want) <= bound))
    assert np.mean(same) > 0.999


def test_float32_erf_is_within_its_documented_error(path):
    x = _float32_inputs(2)
    exact = np.array([math.erf(v) if np.isfinite(v) else np.sign(v) for v in x.astype(np.float64)])
    exact[np.isnan(x)] = np.nan
    out = rt.erf(rt.from_numpy(x)).numpy()
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, exact, rtol=0, atol=3e-7)  # _erf.py: within 3e-7


def test_sigmoid_is_within_a_few_ulp_of_torch(path):
    torch = pytest.importorskip("torch")
    x = _float32_inputs(3)
    out = rt.sigmoid(rt.from_numpy(x)).numpy()
    want = torch.sigmoid(torch.from_numpy(x)).numpy()
    normal = np.abs(want) >= np.finfo(np.float32).tiny  # below: exp(x) flushed to 0, as documented
    assert np.array_equal(np.isnan(out), np.isnan(want))
    assert _ulp(out[normal], want[normal]).max() <= 4
    np.testing.assert_allclose(out[~normal], want[~normal], rtol=0, atol=float(np.finfo(np.float32).tiny))


def test_silu_and_hardswish_match_torch(path):
    torch = pytest.importorskip("torch")
    x = _float32_inputs(4).reshape(-1, 1)[::2]  # a strided view
    t = torch.from_numpy(np.ascontiguousarray(x))
    np.testing.assert_allclose(rt.nn.functional.silu(rt.from_numpy(x)).numpy(), torch.nn.functional.silu(t).numpy(),
                               rtol=2e-6, atol=1e-37)
    np.testing.assert_allclose(rt.nn.functional.hardswish(rt.from_numpy(x)).numpy(),
                               torch.nn.functional.hardswish(t).numpy(), rtol=1e-6, atol=0)


def test_compiled_hardswish_and_sigmoid_agree_with_the_numpy_kernels():
    x = _float32_inputs(5)
    compiled = (_stable_sigmoid(np, x), rt.nn.functional.hardswish(rt.from_numpy(x)).numpy())
    with cpu_kernels.numpy_only(), np.errstate(invalid="ignore"):  # numpy's -inf·0 is NaN, and says so
        reference = (_stable_sigmoid(np, x), rt.nn.functional.hardswish(rt.from_numpy(x)).numpy())
    np.testing.assert_array_equal(compiled[1], reference[1])  # the same operations in the same order
    assert _ulp(compiled[0], reference[0])[np.abs(reference[0]) >= np.finfo(np.float32).tiny].max() <= 4


def test_compiled_silu_gives_the_bits_of_x_times_the_compiled_sigmoid():
    x = _float32_inputs(6).reshape(-1, 1)[::3]  # a strided view
    with np.errstate(invalid="ignore"):  # -inf·0 is NaN on both sides
        want = x * _stable_sigmoid(np, x)
        got = rt.nn.functional.silu(rt.from_numpy(x)).numpy()
    assert got.dtype == np.float32 and got.shape == x.shape
    np.testing.assert_array_equal(got, want)  # bit for bit, NaN where NaN


def test_compiled_relu_gives_numpy_maximums_bits():
    from flopcount.runtime.graph.fused import fused_elementwise

    x = _float32_inputs(7)
    x[:4] = [-0.0, np.nan, -np.nan, -np.inf]
    x[4:8] = np.frombuffer(np.array([0xFFC00001, 0x7FC00002, 0x80000000, 1], np.uint32).tobytes(), np.float32)
    want = np.maximum(x, 0)
    got = rt.relu(rt.from_numpy(x)).numpy()
    with np.errstate(over="ignore"):  # x·x of the huge inputs is inf on both sides
        chained = fused_elementwise(rt.from_numpy(x), rt.from_numpy(x), steps=[("mul", (0, 1), {}), ("relu", (-1,), {})])
        chained_want = np.maximum(x * x, 0)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))  # -0 to +0, NaN payloads kept
    np.testing.assert_array_equal(chained.numpy().view(np.uint32), chained_want.view(np.uint32))


@pytest.mark.parametrize("activation", ["relu", "hardswish", "silu"])
@pytest.mark.parametrize("seed", range(6))
def test_conv_with_its_activation_gives_the_bits_of_the_two_ops(activation, seed):
    from flopcount.runtime.registry import get_op

    rng = np.random.default_rng(seed)
    n, c = int(rng.integers(1, 3)), int(rng.integers(1, 5)) * 2
    groups = [1, 2, c][seed % 3]  # dense, grouped, depthwise
    k = int(rng.integers(1, 4))
    x = rng.standard_normal((n, c, 9, 7)).astype(np.float32) * 3
    w = rng.standard_normal((c, c // groups, k, k)).astype(np.float32)
    b = rng.standard_normal(c).astype(np.float32) if seed % 2 else None
    geometry = ((1 + seed % 2, 1), (k // 2, 0), (1, 1), groups)
    got = _conv_kernels.conv_forward_activation(np, x, w, b, *geometry, activation)
    conv = _conv_kernels.conv_forward(np, x, w, b, *geometry)
    want = get_op(activation)._kernel_by_device["cpu"](np, conv)
    assert got.dtype == np.float32 and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    with cpu_kernels.numpy_only():  # no compiled pass: the caller runs the two kernels
        assert _conv_kernels.conv_forward_activation(np, x, w, b, *geometry, activation) is None


@pytest.mark.parametrize("relu", [True, False])
@pytest.mark.parametrize("seed", range(6))
def test_conv_with_its_residual_add_gives_the_bits_of_the_ops(relu, seed):
    rng = np.random.default_rng(100 + seed)
    n, c = int(rng.integers(1, 3)), int(rng.integers(1, 5)) * 2
    groups = [1, 2, c][seed % 3]  # dense, grouped, depthwise
    x = rng.standard_normal((n, c, 9, 7)).astype(np.float32) * 3
    w = rng.standard_normal((c, c // groups, 3, 3)).astype(np.float32)
    b = rng.standard_normal(c).astype(np.float32) if seed % 2 else None
    other = rng.standard_normal((n, c, 9, 7)).astype(np.float32) * 3
    geometry = ((1, 1), (1, 1), (1, 1), groups)
    got = _conv_kernels.conv_forward_residual(np, x, w, b, other, *geometry, relu)
    want = np.add(other, _conv_kernels.conv_forward(np, x, w, b, *geometry))  # the add takes either order
    if relu:
        want = np.maximum(want, np.float32(0))  # ReLU's kernel: numpy maximum's bits
    assert got.dtype == np.float32 and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    with cpu_kernels.numpy_only():  # no compiled pass: the caller runs the kernels
        assert _conv_kernels.conv_forward_residual(np, x, w, b, other, *geometry, relu) is None


@pytest.mark.parametrize("seed", range(40))
def test_compiled_max_pool_gives_the_numpy_kernels_values(seed):
    """Random 1-d and 2-d pools (strides, padding up to half the kernel, dilation, ceil mode) on
    inputs with NaN and -inf mixed in, float32 or float64, contiguous or strided."""
    rng = np.random.default_rng(seed)
    nd = int(rng.integers(1, 3))
    kernel = tuple(int(k) for k in rng.integers(1, 5, nd))
    stride = tuple(int(s) for s in rng.integers(1, 4, nd))
    dilation = tuple(int(d) for d in rng.integers(1, 3, nd))
    padding = tuple(int(rng.integers(0, k // 2 + 1)) for k in kernel)
    size = tuple(int(d * (k - 1) + 1 + rng.integers(0, 12)) for k, d in zip(kernel, dilation))
    dtype = [np.float32, np.float64][seed % 2]
    x = rng.standard_normal((int(rng.integers(1, 3)), 6) + size).astype(dtype)
    x.reshape(-1)[rng.choice(x.size, 3, replace=False)] = [np.nan, -np.inf, np.inf]
    if seed % 3 == 0:
        x = x[:, ::2]  # every other channel: not contiguous
    pool = rt.nn.functional.max_pool1d if nd == 1 else rt.nn.functional.max_pool2d
    args = (kernel, stride, padding, dilation, bool(seed % 4 == 1))
    got = pool(rt.from_numpy(x), *args).numpy()
    with cpu_kernels.numpy_only():
        want = pool(rt.from_numpy(x), *args).numpy()
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)  # NaN where want has NaN


@pytest.mark.parametrize("factor_first", [False, True])
@pytest.mark.parametrize("seed", range(4))
def test_the_exported_erf_gelu_chain_in_one_pass_gives_the_chains_bits(factor_first, seed):
    """Div, Erf, Add, Mul, Mul as exporters write GELU (x·0.5 last, as PyTorch's exporter, or
    first, as BERT's code), with GELU's constants and with random ones, on special values."""
    from flopcount.runtime.graph import fused

    tail = (("mul", (3, -3), {}), ("mul", (0, -4), {})) if factor_first else \
        (("mul", (0, -3), {}), ("mul", (-4, 3), {}))
    steps = (("div", (0, 1), {}), ("erf", (-1,), {}), ("add", (-2, 2), {})) + tail
    rng = np.random.default_rng(seed)
    x = _float32_inputs(seed).reshape(1, -1)
    constants = (np.sqrt(2.0), 1.0, 0.5) if seed % 2 else rng.standard_normal(3) * 2
    xs = (x,) + tuple(np.array(c, np.float32) for c in constants)
    got = fused._erf_gelu(np, xs, steps)
    with np.errstate(all="ignore"):
        want = fused._evaluate(np, xs, steps, "cpu")
    assert got is not None and got.dtype == np.float32
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))  # NaN payloads too
    with cpu_kernels.numpy_only():
        assert fused._erf_gelu(np, xs, steps) is None  # the chain runs step by step


def _random_layer_norm(seed: int) -> dict:
    """Rows of 1-800 values (1-3 trailing dims normalized), an offset mean, a strided input in
    some cases, with or without the weight and the bias."""
    rng = np.random.default_rng(seed)
    normalized = tuple(int(d) for d in rng.integers(1, 10, int(rng.integers(1, 4))))
    if seed % 4 == 0:
        normalized = (int(rng.integers(64, 800)),)
    lead = tuple(int(d) for d in rng.integers(1, 6, int(rng.integers(1, 3))))
    x = (rng.standard_normal(lead + normalized) * rng.uniform(0.1, 10) + rng.uniform(-5, 5)).astype(np.float32)
    if seed % 3 == 0:  # a transposed view, as a channels-first map seen channels-last
        x = np.ascontiguousarray(np.swapaxes(x, 0, -1)).swapaxes(0, -1)
    weight = rng.standard_normal(normalized).astype(np.float32) if seed % 2 else None
    bias = rng.standard_normal(normalized).astype(np.float32) if seed % 5 else None
    return dict(x=x, weight=weight, bias=bias, normalized=normalized, eps=float(rng.choice([1e-5, 1e-6, 1e-12])))


@pytest.mark.parametrize("seed", range(24))
def test_compiled_layer_norm_is_as_close_to_the_exact_result_as_the_numpy_kernel(seed):
    from flopcount.runtime.ops.norm import LayerNorm

    case = _random_layer_norm(seed)
    x, weight, bias, normalized, eps = case["x"], case["weight"], case["bias"], case["normalized"], case["eps"]
    dims = tuple(range(x.ndim - len(normalized), x.ndim))
    x64 = x.astype(np.float64)
    exact = (x64 - x64.mean(dims, keepdims=True)) / np.sqrt(x64.var(dims, keepdims=True) + eps)
    exact = exact * (1.0 if weight is None else weight) + (0.0 if bias is None else bias)
    got = LayerNorm.forward(np, x, weight, bias, normalized_shape=normalized, eps=eps)
    with cpu_kernels.numpy_only():
        reference = LayerNorm.forward(np, x, weight, bias, normalized_shape=normalized, eps=eps)
    assert got.dtype == np.float32 and got.shape == x.shape
    # float32 sums in vector lanes against numpy's pairwise ones: the same order of error
    allowed = max(3 * np.max(np.abs(reference - exact)), 8 * np.finfo(np.float32).eps * np.max(np.abs(exact)))
    assert np.max(np.abs(got - exact)) <= allowed


def test_layer_norm_of_a_channels_first_map_over_its_channels_gives_contiguous_rows():
    from flopcount.runtime.ops.norm import LayerNorm

    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 96, 14, 14)).astype(np.float32).transpose(0, 2, 3, 1)[:1]  # as ConvNeXt's exports
    weight, bias = rng.standard_normal(96).astype(np.float32), rng.standard_normal(96).astype(np.float32)
    got = LayerNorm.forward(np, x, weight, bias, normalized_shape=(96,), eps=1e-6)
    with cpu_kernels.numpy_only():
        reference = LayerNorm.forward(np, x, weight, bias, normalized_shape=(96,), eps=1e-6)
    assert got.flags.c_contiguous  # channels last in memory, as the linear layer after it reads them
    np.testing.assert_allclose(got, reference, rtol=1e-5, atol=1e-5)


def test_layer_norm_matches_torch(path):
    torch = pytest.importorskip("torch")
    for seed in range(6):
        case = _random_layer_norm(seed)
        x, weight, bias, normalized, eps = case["x"], case["weight"], case["bias"], case["normalized"], case["eps"]
        got = rt.nn.functional.layer_norm(rt.from_numpy(x), normalized,
                                          None if weight is None else rt.from_numpy(weight),
                                          None if bias is None else rt.from_numpy(bias), eps).numpy()
        want = torch.nn.functional.layer_norm(torch.from_numpy(np.ascontiguousarray(x)), normalized,
                                              None if weight is None else torch.from_numpy(weight),
                                              None if bias is None else torch.from_numpy(bias), eps).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-5)


@pytest.mark.parametrize("seed", range(12))
def test_global_average_pool_is_within_the_rounding_of_the_exact_mean(path, seed):
    from flopcount.runtime.ops.pooling import AdaptiveAvgPool

    rng = np.random.default_rng(seed)
    shape = (int(rng.integers(1, 3)), int(rng.integers(1, 70)), int(rng.integers(1, 30)), int(rng.integers(1, 30)))
    dtype = [np.float32, np.float64][seed % 2]
    x = (rng.standard_normal(shape) * 4 + 1).astype(dtype)
    if seed % 3 == 0:
        x = np.ascontiguousarray(x.transpose(0, 1, 3, 2)).transpose(0, 1, 3, 2)  # a strided plane
    got = AdaptiveAvgPool.forward(np, x, output_size=(1, 1))
    exact = x.astype(np.float64).mean(axis=(2, 3), keepdims=True)
    size = shape[2] * shape[3]
    bound = (size + 2) * np.finfo(dtype).eps * np.abs(x).astype(np.float64).mean(axis=(2, 3), keepdims=True)
    assert got.shape == shape[:2] + (1, 1) and got.dtype == dtype
    assert np.all(np.abs(got - exact) <= bound)


def test_kernels_step_aside_for_other_array_modules_and_inside_numpy_only():
    assert cpu_kernels.kernel("depthwise") is not None
    assert cpu_kernels.kernel("depthwise", xp=object()) is None  # e.g. CuPy: its own kernels
    with cpu_kernels.numpy_only():
        assert cpu_kernels.kernel("depthwise") is None and cpu_kernels.kernel("elementwise") is None
    assert cpu_kernels.kernel("depthwise") is not None


def _python(code: str, **env) -> str:
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                            env={**os.environ, **env}, timeout=300)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_import_and_counting_do_not_load_numba_and_the_switch_keeps_it_out():
    counting = ("import sys, flopcount; flopcount.profile('mobilenet_v3_small', input_shape=(1, 3, 64, 64)); "
                "print('numba' in sys.modules)")
    assert _python(counting) == "False"
    running = ("import sys, numpy as np, flopcount.runtime as rt; "
               "x = rt.from_numpy(np.ones((1, 4, 5, 5), np.float32)); w = rt.from_numpy(np.ones((4, 1, 3, 3), np.float32)); "
               "y = rt.nn.functional.conv2d(x, w, None, 1, 1, 1, 4); rt.erf(x); print('numba' in sys.modules)")
    assert _python(running) == "True"
    assert _python(running, **{cpu_kernels.ENV: "0"}) == "False"


def test_docstring_example():
    import doctest

    failures, tried = doctest.testmod(cpu_kernels)
    assert tried and not failures


def test_depthwise_and_narrow_conv_blocks_on_an_avx2_cpu(tmp_path):
    # the 8-float kernels of a CPU with AVX2 and FMA but not AVX-512: both kinds of depthwise
    # block and the narrow-input conv's, against float64 (the stem's as a sum of depthwise
    # convs, one per input channel)
    out = run_without_avx512("""
        import numpy as np
        from flopcount.runtime.cpu_kernels import _depthwise, _narrow_conv, _simd
        assert _simd.LANES == 8
        rng = np.random.default_rng(0)
        x = rng.standard_normal((2, 3, 23, 37)).astype(np.float32)
        for k, s in ((7, 1), (3, 2)):
            w = rng.standard_normal((3, 1, k, k)).astype(np.float32)
            got = _depthwise.depthwise_conv2d(x, w, None, (s, s), (k // 2, k // 2), (1, 1))
            exact = _depthwise.depthwise_conv2d(x.astype(np.float64), w.astype(np.float64), None, (s, s),
                                                (k // 2, k // 2), (1, 1))
            size = _depthwise.depthwise_conv2d(np.abs(x).astype(np.float64), np.abs(w).astype(np.float64), None,
                                               (s, s), (k // 2, k // 2), (1, 1))
            assert np.all(np.abs(got - exact) <= (k * k + 1) * 2.0 ** -24 * size), k
        w = rng.standard_normal((5, 3, 7, 7)).astype(np.float32)  # a stem: 3 input channels
        got = _narrow_conv.conv2d(x, w, None, (2, 2), (3, 3), (1, 1))
        x64, w64 = x.astype(np.float64), w.astype(np.float64)
        exact = sum(_depthwise.depthwise_conv2d(x64[:, c:c + 1], w64[:, c:c + 1], None, (2, 2), (3, 3), (1, 1))
                    for c in range(3))
        size = sum(_depthwise.depthwise_conv2d(np.abs(x64[:, c:c + 1]), np.abs(w64[:, c:c + 1]), None, (2, 2),
                                               (3, 3), (1, 1)) for c in range(3))
        assert np.all(np.abs(got - exact) <= 148 * 2.0 ** -24 * size), "stem"
        print("ok")
    """, tmp_path)
    assert out == "ok"


_POOL_ONCE = """
import numpy as np
from flopcount.runtime import cpu_kernels
from flopcount.runtime.cpu_kernels import _jit
_jit.KERNEL_SALT = {salt}
pooling = cpu_kernels.kernel("pooling")
x = np.arange(2 * 3 * 6 * 6, dtype=np.float32).reshape(2, 3, 6, 6)
out = pooling.max_pool2d(x, (3, 3), (2, 2), (2, 2), (0, 0), (1, 1))
assert np.array_equal(out, x[:, :, 1::2, 1::2]), out
print(cpu_kernels.compilations())
"""


def _compilations_in_a_new_process(salt: int, cache_dir) -> int:
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache_dir), PYTHONPATH=ROOT)
    done = subprocess.run([sys.executable, "-c", _POOL_ONCE.format(salt=salt)], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return int(done.stdout.strip().splitlines()[-1])


def test_the_disk_cache_is_keyed_by_the_kernel_salt(tmp_path):
    # a second process loads what the first compiled; a new salt compiles again
    assert _compilations_in_a_new_process(1, tmp_path) > 0
    assert _compilations_in_a_new_process(1, tmp_path) == 0
    assert _compilations_in_a_new_process(2, tmp_path) > 0


def test_the_cache_stamp_follows_every_file_of_the_kernel_folder(tmp_path, monkeypatch):
    # numba alone checks a kernel against its own file; the IR pieces in _simd.py are another
    from flopcount.runtime.cpu_kernels import _jit

    for name in ("_gemm.py", "_simd.py"):
        (tmp_path / name).write_text("# kernel\n")
    monkeypatch.setattr(_jit, "_HERE", str(tmp_path))
    before = _jit.folder_stamp()
    (tmp_path / "_simd.py").write_text("# kernel, edited\n")
    assert _jit.folder_stamp() != before
    monkeypatch.setattr(_jit, "KERNEL_SALT", _jit.KERNEL_SALT + 1)
    assert _jit.folder_stamp()[0] != before[0]


def test_on_a_cpu_without_vector_fma_the_kernels_fall_back_and_agree(tmp_path):
    # as on an ARM or an old x86 CPU: no AVX2/FMA, so no hand-vectorized kernel; the ops run their
    # portable compiled or numpy code and still give numpy's results
    out = run_without_vector_fma("""
        import numpy as np
        import flopcount.runtime as rt
        from flopcount.runtime import cpu_kernels
        from flopcount.runtime.cpu_kernels import _simd
        assert _simd.LANES == 0 and not _simd.available()
        rng = np.random.default_rng(0)
        a, b = rng.standard_normal((37, 53)).astype(np.float32), rng.standard_normal((53, 29)).astype(np.float32)
        assert np.allclose((rt.tensor(a) @ rt.tensor(b)).numpy(), a @ b, rtol=1e-5, atol=1e-5)
        x = rng.standard_normal((2, 6, 15, 17)).astype(np.float32)
        depthwise = rt.nn.Conv2d(6, 6, 3, padding=1, groups=6)
        stem = rt.nn.Conv2d(6, 4, 7, stride=2, padding=3)
        for conv in (depthwise, stem):
            got = conv(rt.tensor(x)).numpy()
            with cpu_kernels.numpy_only():
                want = conv(rt.tensor(x)).numpy()
            assert np.allclose(got, want, rtol=1e-4, atol=1e-4), conv
        print("ok")
    """, tmp_path)
    assert out == "ok"
