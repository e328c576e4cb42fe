"""TFLite import checked against LiteRT's interpreter (reference kernels: the arithmetic TFLite
specifies) on random inputs, and the counts against hand formulas."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("tflite")
litert = pytest.importorskip("ai_edge_litert.interpreter")

import tflite_models as models

import flopcount
import flopcount.runtime as rt
from flopcount.runtime import tflite as rt_tflite
from flopcount.runtime.errors import ModelFileError, UnsupportedOpError


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("tflite")
    out = {}
    for name, data in (("float_cnn", models.float_cnn()), ("elementwise", models.elementwise_model()),
                       ("math", models.math_model()), ("shape", models.shape_model()),
                       ("int8_cnn", models.int8_cnn())):
        path = folder / f"{name}.tflite"
        path.write_bytes(data)
        out[name] = str(path)
    return out


def _litert(path: str, x: np.ndarray) -> list:
    it = litert.Interpreter(model_path=path, experimental_op_resolver_type=litert.OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    return [it.get_tensor(o["index"]) for o in it.get_output_details()]


def _ours(path: str, x: np.ndarray) -> list:
    out = rt.GraphModule(rt_tflite.load(path))(rt.tensor(x))
    return [t.numpy() for t in (out if isinstance(out, tuple) else (out,))]


def _inputs(shape, seeds=range(3)):
    return [np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32) for seed in seeds]


@pytest.mark.parametrize("name", ["float_cnn", "elementwise", "math", "shape"])
def test_float_models_compute_what_litert_computes(files, name):
    shape = {"float_cnn": (1, 8, 8, 3), "shape": (1, 6, 6, 4)}.get(name, (1, 4, 4, 6))
    for x in _inputs(shape):
        for ref, got in zip(_litert(files[name], x), _ours(files[name], x), strict=True):
            assert got.shape == ref.shape and got.dtype == ref.dtype
            np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)


def test_int8_model_computes_what_litert_computes(files):
    """The int8 softmax and the dequantized logits, exactly: convs, the fully connected layer,
    ADD and average pooling round in TFLite's fixed point as its reference kernels do. (The
    softmax is computed on dequantized values, where TFLite uses a fixed-point exp; both give
    the same int8 here, and could be one unit apart on a value next to a rounding tie.)"""
    for x in _inputs((1, 8, 8, 3), seeds=range(6)):
        (ref_probs, ref_logits), (probs, logits) = _litert(files["int8_cnn"], x), _ours(files["int8_cnn"], x)
        assert probs.dtype == ref_probs.dtype == np.int8
        np.testing.assert_array_equal(probs, ref_probs)
        np.testing.assert_array_equal(logits, ref_logits)


def test_uint8_quantized_layers_compute_what_litert_computes(tmp_path):
    """The older uint8 scheme (weights with a zero point): the same integer arithmetic, exactly."""
    path = tmp_path / "uint8.tflite"
    path.write_bytes(models.uint8_conv_model())
    for x in _inputs((1, 5, 5, 2), seeds=range(4)):
        (ref,), (got,) = _litert(str(path), x), _ours(str(path), x)
        assert got.dtype == ref.dtype == np.uint8
        np.testing.assert_array_equal(got, ref)
    report = flopcount.profile(str(path), device="meta")
    assert report.macs == 5 * 5 * 3 * 3 * 3 * 2 + 4 * 75
    assert report.totals["macs_by_dtype"] == {"int8": report.macs}  # 8-bit integer MACs


def test_int8_elementwise_ops_are_within_one_unit_of_litert(tmp_path):
    """HARD_SWISH, LOGISTIC, TANH, MUL and MEAN run on the dequantized values and are quantized
    once, where TFLite's int8 kernels use lookup tables and fixed-point multipliers with their
    own intermediate roundings: a value next to a rounding tie lands one unit apart, no more."""
    path = tmp_path / "int8_elementwise.tflite"
    path.write_bytes(models.int8_elementwise_model())
    exact = total = 0
    for seed in range(4):
        x = np.random.default_rng(seed).uniform(-1.9, 1.9, (1, 4, 4, 6)).astype(np.float32)
        for ref, got in zip(_litert(str(path), x), _ours(str(path), x), strict=True):
            assert got.dtype == ref.dtype == np.int8 and got.shape == ref.shape
            diff = np.abs(got.astype(np.int32) - ref.astype(np.int32))
            assert diff.max() <= 1
            exact, total = exact + int((diff == 0).sum()), total + diff.size
    assert exact >= 0.95 * total


@pytest.mark.parametrize("name, shape", [("hybrid_fc_model", (2, 16)), ("hybrid_conv_model", (2, 6, 6, 3))])
def test_dynamic_range_quantized_layers_compute_what_litert_computes(tmp_path, name, shape):
    """Float input, int8 weights: the kernels quantize each batch item of the input to int8 on
    the fly (symmetric per row for fully connected layers, asymmetric per item for convs) and
    run int8 MACs, reported as int8."""
    path = tmp_path / f"{name}.tflite"
    path.write_bytes(getattr(models, name)())
    for x in _inputs(shape):
        for ref, got in zip(_litert(str(path), x), _ours(str(path), x), strict=True):
            np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)
    report = flopcount.profile(str(path), device="meta")
    assert report.macs > 0 and report.totals["macs_by_dtype"] == {"int8": report.macs}


def test_int8_add_rounds_as_tflite_fixed_point_does(tmp_path):
    """An int8 ADD alone, on every pair of int8 values, at scales whose factors are not powers
    of two: TFLite's 20-bit shift and two rounding steps, reproduced exactly."""
    b = models.TfliteBuilder()
    a = b.tensor("a", (256, 256), "int8", scale=0.0173, zero_point=-7)
    c = b.tensor("c", (256, 256), "int8", scale=0.0311, zero_point=12)
    y = b.tensor("y", (256, 256), "int8", scale=0.0427, zero_point=3)
    b.op("ADD", [a, c], [y], "AddOptions")
    data = b.build([a, c], [y])
    grid_a, grid_c = np.meshgrid(np.arange(-128, 128, dtype=np.int8), np.arange(-128, 128, dtype=np.int8))
    it = litert.Interpreter(model_content=data, experimental_op_resolver_type=litert.OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    ins = it.get_input_details()
    it.set_tensor(ins[0]["index"], grid_a)
    it.set_tensor(ins[1]["index"], grid_c)
    it.invoke()
    ref = it.get_tensor(it.get_output_details()[0]["index"])
    path = tmp_path / "add.tflite"
    path.write_bytes(data)
    graph = rt_tflite.load(str(path))
    np.testing.assert_array_equal(rt.GraphModule(graph)(rt.tensor(grid_a), rt.tensor(grid_c)).numpy(), ref)


def _conv_macs(out, kernel, cin) -> int:
    return math.prod(out) * math.prod(kernel) * cin


@pytest.mark.parametrize("name", ["float_cnn", "int8_cnn"])
def test_macs_and_params_follow_the_hand_formulas(files, name):
    report = flopcount.profile(files[name], device="meta")
    for layer, geometry in models.FLOAT_CNN_LAYERS.items():
        # conv: N*Ho*Wo*Cout*Kh*Kw*Cin (depthwise: Cin = 1 per output channel); fc: N*Out*In
        assert report.row(layer).macs == _conv_macs(geometry["out"], geometry["kernel"], geometry["cin"]), layer
    assert report.macs == sum(_conv_macs(**g) for g in models.FLOAT_CNN_LAYERS.values())
    # the weight tensors: filters and biases of conv1, dw, pw and fc
    weights = 8 * 3 * 3 * 3 + 8 + 3 * 3 * 8 + 8 + 8 * 8 + 8 + 10 * 32 + 10
    assert report.params == weights


def test_transposed_conv_macs_follow_the_hand_formula(files):
    # every input pixel meets the whole kernel: N*Hin*Win*Cin*Kh*Kw*Cout
    assert flopcount.profile(files["shape"], device="meta").row("tconv").macs == 1 * 6 * 6 * 4 * 3 * 3 * 3


def test_int8_macs_are_reported_as_int8(files):
    report = flopcount.profile(files["int8_cnn"], device="meta")
    assert report.totals["macs_by_dtype"] == {"int8": report.macs}
    for layer in models.FLOAT_CNN_LAYERS:
        assert report.row(layer).macs_by_dtype == {"int8": report.row(layer).macs}
    plain = flopcount.profile(files["float_cnn"], device="meta")
    assert plain.totals["macs_by_dtype"] == {"float32": plain.macs}


@pytest.mark.parametrize("name", ["float_cnn", "int8_cnn"])
def test_weights_are_read_only_views_and_meta_makes_no_arrays(files, name, monkeypatch):
    graph = rt_tflite.load(files[name])
    weight = graph.tensors["conv1/w"].data
    assert weight.shape == (8, 3, 3, 3) and not weight.flags.writeable
    # on meta the reader makes no array for a constant above META_KEEP values: none here
    from flopcount.runtime.tflite import reader

    monkeypatch.setattr(reader, "META_KEEP", 0)
    meta = rt_tflite.load(files[name], device="meta")
    assert all(meta.tensors[n].data is None for n in meta.parameters)
    assert meta.cost().macs == graph.cost().macs


def test_graph_inputs_and_outputs_keep_the_files_nhwc_layout(files):
    graph = rt_tflite.load(files["int8_cnn"])
    assert [(v.name, tuple(v.shape), v.dtype.name) for v in graph.inputs] == [("x", (1, 8, 8, 3), "float32")]
    assert [(tuple(v.shape), v.dtype.name) for v in graph.outputs] == [((1, 10), "int8"), ((1, 10), "float32")]


def test_an_unknown_op_is_listed_as_unsupported_and_counted_as_zero(tmp_path):
    b = models.TfliteBuilder()
    x = b.tensor("x", (1, 4))
    y = b.tensor("y", (1, 4))
    b.op("CUMSUM", [x], [y])
    path = tmp_path / "cumsum.tflite"
    path.write_bytes(b.build([x], [y]))
    graph = rt_tflite.load(str(path))
    assert [n.op.__name__ for n in graph.nodes] == ["Opaque"]
    assert graph.nodes[0].attrs["label"] == "TFLite CUMSUM"
    assert graph.cost().flops == 0


def test_truncated_and_foreign_files_are_one_model_file_error(files, tmp_path):
    with open(files["float_cnn"], "rb") as f:
        data = f.read()
    for cut in (len(data) // 3, len(data) // 2, len(data) - 100):
        bad = tmp_path / f"cut{cut}.tflite"
        bad.write_bytes(data[:cut])
        with pytest.raises(ModelFileError, match=str(bad)):
            rt_tflite.load(str(bad))
    other = tmp_path / "other.tflite"
    other.write_bytes(b"not a flatbuffer at all, just text\n" * 4)
    with pytest.raises(ModelFileError, match="TFL3"):
        rt_tflite.load(str(other))


def test_supported_ops_lists_the_brief_ops():
    assert {"CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "AVERAGE_POOL_2D", "MAX_POOL_2D", "ADD", "SUB",
            "MUL", "RELU", "RELU6", "LOGISTIC", "TANH", "HARD_SWISH", "SOFTMAX", "RESHAPE", "CONCATENATION",
            "MEAN", "PAD", "QUANTIZE", "DEQUANTIZE"} <= set(rt_tflite.supported_ops())


def test_the_format_is_found_by_content(files, tmp_path):
    from flopcount.file_formats import FORMATS

    def found(path):
        return [f.kind for f in FORMATS if f.recognises(str(path))]

    renamed = tmp_path / "model.bin"
    renamed.write_bytes(open(files["float_cnn"], "rb").read())
    assert found(files["float_cnn"]) == found(renamed) == ["tflite"]
    other = tmp_path / "model.tflite"
    other.write_bytes(b"\x1c\x00\x00\x00ONNX" + bytes(32))
    assert found(other) == []


def test_without_the_tflite_package_the_error_names_it(files, monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "tflite", None)  # import tflite then fails
    with pytest.raises(ModelFileError, match="pip install tflite"):
        rt_tflite.load(files["float_cnn"])


def test_a_quantized_transposed_conv_is_refused_by_name(tmp_path):
    b = models.TfliteBuilder()
    x = b.tensor("x", (1, 2, 2, 1), "int8", scale=0.1, zero_point=0)
    w = b.tensor("w", (1, 2, 2, 1), "int8", data=np.ones((1, 2, 2, 1), np.int8), scale=0.1, zero_point=0)
    shape = b.tensor("shape", (4,), "int32", data=np.array([1, 4, 4, 1], np.int32))
    y = b.tensor("y", (1, 4, 4, 1), "int8", scale=0.1, zero_point=0)
    b.op("TRANSPOSE_CONV", [shape, w, x], [y], "TransposeConvOptions", Padding=1, StrideH=2, StrideW=2)
    path = tmp_path / "qtconv.tflite"
    path.write_bytes(b.build([x], [y]))
    with pytest.raises(UnsupportedOpError, match="TRANSPOSE_CONV"):
        rt_tflite.load(str(path))


def test_a_tensor_type_without_a_dtype_is_refused_only_where_it_is_used(tmp_path):
    b = models.TfliteBuilder()
    x = b.tensor("x", (1, 4))
    y = b.tensor("y", (1, 4))
    b.tensor("unused_label", (2,), "string")
    b.op("RELU", [x], [y])
    path = tmp_path / "label.tflite"
    path.write_bytes(b.build([x], [y]))
    assert rt_tflite.load(str(path)).cost().flops == 4  # relu: one comparison a value
    words = b.tensor("words", (1, 4), "string")
    b.op("RELU", [words], [b.tensor("z", (1, 4))])
    path.write_bytes(b.build([x], [y]))
    with pytest.raises(UnsupportedOpError, match="'words' has type STRING"):
        rt_tflite.load(str(path))


def test_int8_requantization_is_counted_as_the_rescale_it_stands_for(tmp_path):
    """A tiny int8 model, x (1, 5, 5, 2) -> 3x3 CONV_2D (3 channels, per-channel weights, bias,
    'same') -> ADD of a second input, counted by hand. TFLite's fixed-point rescale is one
    ``requantize`` node each, counted as the real arithmetic it stands for (multiply by the
    factor and round: 2 FLOPs an element; the output's zero point and the clamp to int8: 1 more
    each), not as the int64 steps that round it exactly."""
    rng = np.random.default_rng(5)
    b = models.TfliteBuilder()
    x = b.tensor("x", (1, 5, 5, 2), "int8", scale=0.02, zero_point=-3)
    w = rng.integers(-127, 128, (3, 3, 3, 2)).astype(np.int8)
    scales = np.array([0.004, 0.006, 0.005], np.float32)
    wt = b.tensor("conv/w", w.shape, "int8", data=w, scale=scales, zero_point=np.zeros(3), axis=0)
    bt = b.tensor("conv/b", (3,), "int32", data=rng.integers(-500, 500, 3).astype(np.int32),
                  scale=0.02 * scales, zero_point=np.zeros(3))
    y = b.tensor("conv/out", (1, 5, 5, 3), "int8", scale=0.05, zero_point=4)
    b.op("CONV_2D", [x, wt, bt], [y], "Conv2DOptions", Padding=models.SAME, StrideH=1, StrideW=1,
         FusedActivationFunction=models.NONE, DilationHFactor=1, DilationWFactor=1)
    z = b.tensor("z", (1, 5, 5, 3), "int8", scale=0.03, zero_point=-1)
    s = b.tensor("sum/out", (1, 5, 5, 3), "int8", scale=0.07, zero_point=2)
    b.op("ADD", [y, z], [s], "AddOptions")
    path = tmp_path / "int8_conv_add.tflite"
    path.write_bytes(b.build([x, z], [s]))

    graph = rt_tflite.load(str(path), device="meta")
    assert [n.op_name for n in graph.nodes].count("requantize") == 4  # the conv's, ADD's two operands and sum
    assert not any(n.op_name in ("floor_divide", "where", "ge") for n in graph.nodes)
    pixels_in, pixels_out = 5 * 5 * 2, 5 * 5 * 3
    macs = pixels_out * 3 * 3 * 2
    conv = (pixels_in           # the input's zero point subtracted
            + 2 * macs          # the int32 accumulation
            + pixels_out        # the bias
            + 4 * pixels_out)   # requantized: times the factor, rounded, the zero point added, clamped
    # ADD: each operand minus its zero point, times 2**20, rescaled (2); the sum; requantized (4)
    add = 2 * (1 + 1 + 2) * pixels_out + pixels_out + 4 * pixels_out
    report = flopcount.profile(str(path), device="meta")
    assert (report.macs, report.flops) == (macs, conv + add)

    grid = [np.random.default_rng(seed).integers(-128, 128, (1, 5, 5, c)).astype(np.int8)
            for seed, c in ((0, 2), (1, 3))]
    it = litert.Interpreter(model_path=str(path), experimental_op_resolver_type=litert.OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    for detail, value in zip(it.get_input_details(), grid):
        it.set_tensor(detail["index"], value)
    it.invoke()
    ours = rt.GraphModule(rt_tflite.load(str(path)))(*[rt.tensor(v) for v in grid]).numpy()
    np.testing.assert_array_equal(ours, it.get_tensor(it.get_output_details()[0]["index"]))
