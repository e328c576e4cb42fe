"""Quantized weights: dequantize and quantized_linear against the hand formula, their costs
(weights read at their element size in bits), and the weight formats that make them."""

import math

import ml_dtypes
import numpy as np
import pytest

import flopcount
import flopcount.runtime as rt
from opcheck import Example, op_costs, randn, run_example

RNG = np.random.default_rng(0)
Q4 = RNG.integers(-8, 8, size=(5, 8)).astype(ml_dtypes.int4)        # 5 rows, 2 groups of 4
S4 = np.abs(randn(5, 2, seed=3)) + 0.1


def _dequantized(q, scale):
    groups = scale.shape[1]
    return (q.astype(np.float64).reshape(q.shape[0], groups, -1) * scale[:, :, None]).reshape(q.shape)


def _tflite_reference(x: int, multiplier: int, shift: int) -> int:
    """TFLite's MultiplyByQuantizedMultiplier as its reference kernel writes it, on Python ints:
    x * 2**left, the rounding doubling high multiply (nudge, divide by 2**31 toward zero), then
    RoundingDivideByPOT (the remainder against half, one more toward zero for a negative)."""
    left, right = max(shift, 0), max(-shift, 0)
    product = x * (1 << left) * multiplier
    nudged = product + ((1 << 30) if product >= 0 else 1 - (1 << 30))
    high = abs(nudged) // (1 << 31) * (1 if nudged >= 0 else -1)
    mask = (1 << right) - 1
    return (high >> right) + int((high & mask) > (mask >> 1) + (high < 0))


def _requantized(x, multiplier, shift, zero_point, dtype):
    info = np.iinfo(dtype)
    m, s = np.broadcast_to(multiplier, x.shape), np.broadcast_to(shift, x.shape)
    y = [_tflite_reference(int(v), int(a), int(b)) + zero_point for v, a, b in zip(x.ravel(), m.ravel(), s.ravel())]
    return np.clip(np.array(y, np.int64), info.min, info.max).astype(dtype).reshape(x.shape)


ACC = RNG.integers(-40000, 40000, size=(2, 3, 4)).astype(np.int64)     # int32 accumulators, 4 channels
# per channel: factors 0.3, 0.0021, 1.7 and 0.5 as (multiplier, shift) = multiplier / 2**31 * 2**shift
MULTIPLIER = np.array([1288490189, 1154487209, 1825361101, 1073741824], np.int64)
SHIFT = np.array([-1, -8, 1, 0], np.int64)

EXAMPLES = {
    # 4 FLOPs an element (multiply by the factor, round, add the zero point, clamp to int8): 4·24
    "requantize": Example(lambda x, m, s: rt.nn.functional.requantize(x, m, s, zero_point=-5, dtype=rt.int8),
                          [ACC, MULTIPLIER, SHIFT], lambda x, m, s: _requantized(x, m, s, -5, np.int8),
                          grad=False, macs=0, flops=96),
    # one multiply per weight element: 5·8
    "dequantize": Example(lambda q, s: rt.nn.functional.dequantize(q, s, rt.float64), [Q4, S4], _dequantized,
                          grad=False, macs=0, flops=40),
    # rows·in·out = 6·8·5 MACs; 2·MACs + 40 dequantizing multiplies + 30 bias adds
    "quantized_linear": Example(lambda x, q, s, b: rt.nn.functional.quantized_linear(x, q, s, b),
                                [randn(2, 3, 8), Q4, S4, randn(5, seed=1)],
                                lambda x, q, s, b: x @ _dequantized(q, s).T + b,
                                grad_wrt=[0, 3], macs=240, flops=550),
}


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example(name):
    run_example(name, EXAMPLES[name])


def test_int4_weights_are_read_at_half_a_byte_plus_their_scales():
    x = rt.randn(1, 4096, dtype=rt.bfloat16)
    with rt.meta():
        q = rt.empty(4096, 4096, dtype=rt.int4)
        scale = rt.empty(4096, 4096 // 128, dtype=rt.float16)
    x = x.to("meta")
    cost = op_costs(lambda: rt.nn.functional.quantized_linear(x, q, scale))["quantized_linear"]
    weights = 4096 * 4096
    assert cost.bytes_read == 2 * 4096 + weights // 2 + 2 * weights // 128
    # 4.125 bits per weight: 4 bits, and a 16-bit scale shared by 128 of them
    assert (cost.bytes_read - 2 * 4096) * 8 / weights == 4.125
    assert cost.macs == weights and cost.bytes_written == 2 * 4096


def test_shape_rules_name_the_problem():
    x, s = rt.randn(2, 8), rt.tensor(S4)
    with pytest.raises(rt.ShapeError, match="not a quantized type"):
        rt.nn.functional.quantized_linear(x, rt.randn(5, 8), s)
    with pytest.raises(rt.ShapeError, match=r"scale \(5, 3\) does not divide weight \(5, 8\)"):
        rt.nn.functional.quantized_linear(x, rt.tensor(Q4), rt.randn(5, 3))
    with pytest.raises(rt.ShapeError, match="input must be floating"):
        rt.nn.functional.quantized_linear(rt.ones(2, 8, dtype=rt.int64), rt.tensor(Q4), s)


# --- weight formats ---------------------------------------------------------------------------

@pytest.mark.parametrize("spec,dtype,group,scale,bits", [
    ("int4", rt.int4, 128, rt.float16, 4.125), ("int4:g64", rt.int4, 64, rt.float16, 4.25),
    ("int8", rt.int8, "channel", rt.float16, 8 + 16 / 4096), ("fp8", rt.float8_e4m3fn, "tensor", rt.float32,
                                                              8 + 32 / 4096 ** 2),
])
def test_weight_formats(spec, dtype, group, scale, bits):
    fmt = rt.weight_format(spec)
    assert (fmt.dtype, fmt.group, fmt.scale_dtype) == (dtype, group, scale)
    assert fmt.bits_per_weight(in_features=4096, out_features=4096) == pytest.approx(bits)


def test_unknown_weight_formats_are_one_line_errors():
    with pytest.raises(rt.ShapeError, match="unknown weight format 'int3'; known: int8, int4, fp8"):
        rt.weight_format("int3")
    with pytest.raises(rt.ShapeError, match="the group is gN"):
        rt.weight_format("int4:g0")


@pytest.mark.parametrize("spec", ["int8", "int4:g32", "fp8"])
def test_quantized_layers_reproduce_their_weights_within_a_step(spec):
    rt.manual_seed(0)
    layer = rt.nn.Linear(64, 16)
    net = rt.quantize_weights(rt.nn.Sequential(layer), spec)
    quantized = net[0]
    assert isinstance(quantized, rt.nn.QuantizedLinear) and quantized.weight.dtype is rt.weight_format(spec).dtype
    w = layer.weight.numpy().astype(np.float64)
    back = rt.nn.functional.dequantize(quantized.weight, quantized.scale, rt.float64).numpy()
    step = np.repeat(quantized.scale.numpy().astype(np.float64), 64 // quantized.scale.shape[1], axis=1)
    if spec == "fp8":  # e4m3 keeps 3 mantissa bits: a relative step of 2^-3 at most
        assert np.all(np.abs(back - w) <= np.abs(w) * 2.0 ** -4 + step * 2.0 ** -9)
    else:              # round to nearest: within half a step (plus the float16 scale's rounding)
        assert np.all(np.abs(back - w) <= step * (0.5 + 1e-2))
    x = rt.randn(3, 64)
    np.testing.assert_allclose(net(x).numpy(), x.numpy() @ back.T + layer.bias.numpy(), rtol=1e-5, atol=1e-5)


def test_quantize_weights_leaves_the_head_and_tied_weights():
    class Tiny(rt.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = rt.nn.Embedding(10, 8)
            self.proj = rt.nn.Linear(8, 8)
            self.tied = rt.nn.Linear(8, 10, bias=False)
            self.tied.weight = self.embed.weight
            self.lm_head = rt.nn.Linear(8, 10)

    net = rt.quantize_weights(Tiny(), "int8")
    assert type(net.proj) is rt.nn.QuantizedLinear
    assert type(net.tied) is rt.nn.Linear and type(net.lm_head) is rt.nn.Linear


def test_profile_weights_option_llama2_7b_in_int4():
    # every Linear of the decoder layers in int4 with a float16 scale per 128 inputs; the
    # embeddings and lm_head stay in bfloat16 (as AWQ/GPTQ checkpoints keep them)
    report = flopcount.profile("llama2_7b", dtype="bf16", weights="int4", device="meta", input_shape=(1, 1))
    d, ff, layers, vocab = 4096, 11008, 32, 32000
    per_layer = 4 * d * d + 3 * d * ff
    quantized = layers * per_layer
    assert report.memory.parameters["int4"] == quantized // 2
    assert report.memory.parameters["float16"] == 2 * quantized // 128
    norms = layers * 2 * d + d
    assert report.memory.parameters["bfloat16"] == 2 * (2 * vocab * d + norms)
    # a decode step reads each quantized weight once at 4.125 bits
    reads = sum(r.bytes_read for r in report.by_op("forward") if r.op == "quantized_linear")
    activations = sum(2 * r.input_shapes[0][-1] for r in report.by_op("forward") if r.op == "quantized_linear")
    assert reads - activations == quantized * 4.125 / 8


def test_gpt2_conv1d_layers_are_quantized_as_the_linear_layers_they_are():
    from flopcount.models.gpt2 import Conv1D

    layer = Conv1D(16, 128)  # weight (in, out) = (128, 16)
    net = rt.quantize_weights(rt.nn.Sequential(layer), "int8")
    quantized = net[0]
    assert type(quantized) is rt.nn.QuantizedLinear and tuple(quantized.weight.shape) == (16, 128)
    w = layer.weight.numpy().T.astype(np.float64)  # (out, in)
    back = rt.nn.functional.dequantize(quantized.weight, quantized.scale, rt.float64).numpy()
    assert np.all(np.abs(back - w) <= quantized.scale.numpy().astype(np.float64) * (0.5 + 1e-2))
    x = rt.randn(3, 128)
    np.testing.assert_allclose(net(x).numpy(), x.numpy() @ back.T + layer.bias.numpy(), rtol=1e-5, atol=1e-5)
    # GPT-2 small in int4: the 4 Conv1D layers of each of its 12 blocks, lm_head tied and kept
    report = flopcount.profile("gpt2", weights="int4", device="meta", input_shape=(1, 8))
    d, layers = 768, 12
    quantized_weights = layers * (d * 3 * d + d * d + d * 4 * d + 4 * d * d)
    assert report.memory.parameters["int4"] == quantized_weights // 2
    assert report.memory.parameters["float16"] == 2 * quantized_weights // 128


def test_requantize_rounds_as_tflite_and_is_the_real_factor_within_one_unit():
    """Against the reference kernel's integer steps on every sign and both rounding ties, and
    against the real product: fixed point rounds twice, so it may land one unit from it."""
    x = np.concatenate([np.arange(-300, 301), RNG.integers(-2 ** 31, 2 ** 31, 2000)]).astype(np.int64)
    for factor in (0.5, 0.25, 0.3, 0.0021, 1.7, 3.0e-6):
        fraction, exponent = math.frexp(factor)   # factor = fraction * 2**exponent, fraction in [0.5, 1)
        multiplier, shift = np.array([round(fraction * 2 ** 31)]), np.array([exponent])
        got = rt.nn.functional.requantize(rt.tensor(x), rt.tensor(multiplier), rt.tensor(shift)).numpy()
        np.testing.assert_array_equal(got, _requantized(x, multiplier, shift, 0, np.int64))
        assert np.abs(got - x * factor).max() <= 1.0


def test_requantize_counts_the_rescale_it_stands_for():
    """Multiply and round: 2 FLOPs an element; the zero point and the clamp to a narrower type
    one more each. Bytes: the accumulator, the factors and the output."""
    x = rt.tensor(ACC)
    m, s = rt.tensor(MULTIPLIER), rt.tensor(SHIFT)
    plain = op_costs(lambda: rt.nn.functional.requantize(x, m, s))["requantize"]
    assert (plain.macs, plain.flops) == (0, 2 * 24)
    full = op_costs(lambda: rt.nn.functional.requantize(x, m, s, zero_point=0, dtype=rt.int8))["requantize"]
    assert full.flops == 4 * 24
    assert (full.bytes_read, full.bytes_written) == (8 * 24 + 8 * 4 + 8 * 4, 24)


def test_requantize_refuses_factors_that_do_not_fit():
    x = rt.tensor(ACC)
    with pytest.raises(rt.ShapeError, match=r"multiplier must be int64 with one value or one per channel \(4\)"):
        rt.nn.functional.requantize(x, rt.tensor(MULTIPLIER[:3]), rt.tensor(SHIFT))
    with pytest.raises(rt.ShapeError, match="output must be an integer type, got float32"):
        rt.nn.functional.requantize(x, rt.tensor(MULTIPLIER), rt.tensor(SHIFT), dtype=rt.float32)
