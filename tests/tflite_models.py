"""Small ``.tflite`` files built in the tests with the ``tflite`` package's flatbuffer builder
functions: ``TfliteBuilder`` collects tensors, buffers and operators and writes the model.

    b = TfliteBuilder()
    x = b.tensor("x", (1, 8, 8, 3))
    w = b.tensor("w", (4, 3, 3, 3), data=np.ones((4, 3, 3, 3), np.float32))
    y = b.tensor("y", (1, 8, 8, 4))
    b.op("CONV_2D", [x, w], [y], "Conv2DOptions", Padding=0, StrideH=1, StrideW=1)
    data = b.build([x], [y])   # the file's bytes
"""

from __future__ import annotations

import numpy as np
import pytest

tflite = pytest.importorskip("tflite")
flatbuffers = pytest.importorskip("flatbuffers")

_TYPES = {"float32": "FLOAT32", "int8": "INT8", "int32": "INT32", "uint8": "UINT8", "int64": "INT64", "string": "STRING",
          "float16": "FLOAT16"}


class TfliteBuilder:
    def __init__(self):
        self.tensors = []     # (name, shape, dtype, buffer index, quantization or None)
        self.buffers = [b""]  # buffer 0: the schema's empty sentinel
        self.ops = []         # (op name, inputs, outputs, options type, options fields)
        self.codes = []

    def tensor(self, name: str, shape, dtype: str = "float32", data=None, scale=None, zero_point=None,
               axis: int = 0) -> int:
        """A tensor (its values in a buffer when ``data`` is given; quantized with ``scale``)."""
        buffer = 0
        if data is not None:
            self.buffers.append(np.ascontiguousarray(np.asarray(data, dtype)).tobytes())
            buffer = len(self.buffers) - 1
        quant = None
        if scale is not None:
            scale = np.atleast_1d(np.asarray(scale, np.float32))
            zero = np.zeros(scale.size, np.int64) if zero_point is None else np.atleast_1d(np.asarray(zero_point, np.int64))
            quant = (scale, zero, axis)
        self.tensors.append((name, tuple(shape), dtype, buffer, quant))
        return len(self.tensors) - 1

    def op(self, name: str, inputs, outputs, options: str | None = None, **fields) -> None:
        if name not in self.codes:
            self.codes.append(name)
        self.ops.append((name, list(inputs), list(outputs), options, fields))

    def build(self, inputs, outputs) -> bytes:
        b = flatbuffers.Builder(1024)
        buffers = [self._buffer(b, data) for data in self.buffers]
        tensors = [self._tensor(b, *t) for t in self.tensors]
        ops = [self._operator(b, *o) for o in self.ops]
        codes = []
        for name in self.codes:
            tflite.OperatorCodeStart(b)
            code = getattr(tflite.BuiltinOperator, name)
            tflite.OperatorCodeAddDeprecatedBuiltinCode(b, min(code, 127))
            tflite.OperatorCodeAddBuiltinCode(b, code)
            tflite.OperatorCodeAddVersion(b, 1)
            codes.append(tflite.OperatorCodeEnd(b))
        graph_name = b.CreateString("main")
        t_vec, o_vec = self._offsets(b, tensors), self._offsets(b, ops)
        in_vec = b.CreateNumpyVector(np.asarray(inputs, np.int32))
        out_vec = b.CreateNumpyVector(np.asarray(outputs, np.int32))
        tflite.SubGraphStart(b)
        tflite.SubGraphAddTensors(b, t_vec)
        tflite.SubGraphAddOperators(b, o_vec)
        tflite.SubGraphAddInputs(b, in_vec)
        tflite.SubGraphAddOutputs(b, out_vec)
        tflite.SubGraphAddName(b, graph_name)
        graph = tflite.SubGraphEnd(b)
        graphs, code_vec, buf_vec = self._offsets(b, [graph]), self._offsets(b, codes), self._offsets(b, buffers)
        description = b.CreateString("flopcount test model")
        tflite.ModelStart(b)
        tflite.ModelAddVersion(b, 3)
        tflite.ModelAddOperatorCodes(b, code_vec)
        tflite.ModelAddSubgraphs(b, graphs)
        tflite.ModelAddDescription(b, description)
        tflite.ModelAddBuffers(b, buf_vec)
        b.Finish(tflite.ModelEnd(b), file_identifier=b"TFL3")
        return bytes(b.Output())

    @staticmethod
    def _offsets(b, items) -> int:
        b.StartVector(4, len(items), 4)
        for item in reversed(items):
            b.PrependUOffsetTRelative(item)
        return b.EndVector()

    @staticmethod
    def _buffer(b, data: bytes) -> int:
        vec = None
        if data:
            b.StartVector(1, len(data), 16)  # 16-byte aligned, as TFLite's converter writes them
            b.head -= len(data)
            b.Bytes[b.head:b.head + len(data)] = data
            vec = b.EndVector()
        tflite.BufferStart(b)
        if vec is not None:
            tflite.BufferAddData(b, vec)
        return tflite.BufferEnd(b)

    @staticmethod
    def _tensor(b, name, shape, dtype, buffer, quant) -> int:
        name_off = b.CreateString(name)
        shape_vec = b.CreateNumpyVector(np.asarray(shape, np.int32))
        q = None
        if quant is not None:
            scale, zero, axis = quant
            s_vec, z_vec = b.CreateNumpyVector(scale), b.CreateNumpyVector(zero)
            tflite.QuantizationParametersStart(b)
            tflite.QuantizationParametersAddScale(b, s_vec)
            tflite.QuantizationParametersAddZeroPoint(b, z_vec)
            tflite.QuantizationParametersAddQuantizedDimension(b, axis)
            q = tflite.QuantizationParametersEnd(b)
        tflite.TensorStart(b)
        tflite.TensorAddShape(b, shape_vec)
        tflite.TensorAddType(b, getattr(tflite.TensorType, _TYPES[dtype]))
        tflite.TensorAddBuffer(b, buffer)
        tflite.TensorAddName(b, name_off)
        if q is not None:
            tflite.TensorAddQuantization(b, q)
        return tflite.TensorEnd(b)

    def _operator(self, b, name, inputs, outputs, options, fields) -> int:
        opts = None
        if options is not None:
            getattr(tflite, f"{options}Start")(b)
            for field, value in fields.items():
                getattr(tflite, f"{options}Add{field}")(b, value)
            opts = getattr(tflite, f"{options}End")(b)
        in_vec = b.CreateNumpyVector(np.asarray(inputs, np.int32))
        out_vec = b.CreateNumpyVector(np.asarray(outputs, np.int32))
        tflite.OperatorStart(b)
        tflite.OperatorAddOpcodeIndex(b, self.codes.index(name))
        tflite.OperatorAddInputs(b, in_vec)
        tflite.OperatorAddOutputs(b, out_vec)
        if opts is not None:
            tflite.OperatorAddBuiltinOptionsType(b, getattr(tflite.BuiltinOptions, options))
            tflite.OperatorAddBuiltinOptions(b, opts)
        return tflite.OperatorEnd(b)


# --- the models the tests use ------------------------------------------------------------------

# activation codes of the schema
NONE, RELU, RELU6 = 0, 1, 3
SAME, VALID = 0, 1


def _weights(rng, shape, spread=0.3):
    return rng.uniform(-spread, spread, shape).astype(np.float32)


def float_cnn(seed: int = 0) -> bytes:
    """x (1, 8, 8, 3) -> conv 3x3 (8, SAME, relu6) -> depthwise 3x3 (stride 2, relu) -> conv 1x1
    -> add -> relu6 -> average pool 2x2 -> max pool 2x2 (SAME, stride 1) -> reshape (1, 32)
    -> fully connected (10) -> softmax."""
    rng = np.random.default_rng(seed)
    b = TfliteBuilder()
    x = b.tensor("x", (1, 8, 8, 3))
    w1 = b.tensor("conv1/w", (8, 3, 3, 3), data=_weights(rng, (8, 3, 3, 3)))
    b1 = b.tensor("conv1/b", (8,), data=_weights(rng, (8,)))
    c1 = b.tensor("conv1/Relu6", (1, 8, 8, 8))
    b.op("CONV_2D", [x, w1, b1], [c1], "Conv2DOptions", Padding=SAME, StrideH=1, StrideW=1,
         FusedActivationFunction=RELU6, DilationHFactor=1, DilationWFactor=1)
    wd = b.tensor("dw/w", (1, 3, 3, 8), data=_weights(rng, (1, 3, 3, 8)))
    bd = b.tensor("dw/b", (8,), data=_weights(rng, (8,)))
    d = b.tensor("dw/Relu", (1, 4, 4, 8))
    b.op("DEPTHWISE_CONV_2D", [c1, wd, bd], [d], "DepthwiseConv2DOptions", Padding=SAME, StrideH=2, StrideW=2,
         DepthMultiplier=1, FusedActivationFunction=RELU, DilationHFactor=1, DilationWFactor=1)
    wp = b.tensor("pw/w", (8, 1, 1, 8), data=_weights(rng, (8, 1, 1, 8)))
    bp = b.tensor("pw/b", (8,), data=_weights(rng, (8,)))
    p = b.tensor("pw/BiasAdd", (1, 4, 4, 8))
    b.op("CONV_2D", [d, wp, bp], [p], "Conv2DOptions", Padding=VALID, StrideH=1, StrideW=1,
         DilationHFactor=1, DilationWFactor=1)
    a = b.tensor("block/add", (1, 4, 4, 8))
    b.op("ADD", [d, p], [a], "AddOptions")
    r = b.tensor("block/Relu6", (1, 4, 4, 8))
    b.op("RELU6", [a], [r])
    ap = b.tensor("avg/AvgPool", (1, 2, 2, 8))
    b.op("AVERAGE_POOL_2D", [r], [ap], "Pool2DOptions", Padding=VALID, StrideH=2, StrideW=2, FilterHeight=2,
         FilterWidth=2)
    mp = b.tensor("max/MaxPool", (1, 2, 2, 8))
    b.op("MAX_POOL_2D", [ap], [mp], "Pool2DOptions", Padding=SAME, StrideH=1, StrideW=1, FilterHeight=2,
         FilterWidth=2)
    shape = b.tensor("flat/shape", (2,), "int32", data=np.array([1, 32], np.int32))
    f = b.tensor("flat/Reshape", (1, 32))
    b.op("RESHAPE", [mp, shape], [f])
    wf = b.tensor("fc/w", (10, 32), data=_weights(rng, (10, 32)))
    bf = b.tensor("fc/b", (10,), data=_weights(rng, (10,)))
    logits = b.tensor("fc/MatMul", (1, 10))
    b.op("FULLY_CONNECTED", [f, wf, bf], [logits], "FullyConnectedOptions")
    y = b.tensor("probs/Softmax", (1, 10))
    b.op("SOFTMAX", [logits], [y], "SoftmaxOptions", Beta=1.0)
    return b.build([x], [y])


# (name, shape, kernel) of the float CNN's weighted layers, for the hand formulas
FLOAT_CNN_LAYERS = {"conv1": {"out": (1, 8, 8, 8), "kernel": (3, 3), "cin": 3},
                    "dw": {"out": (1, 4, 4, 8), "kernel": (3, 3), "cin": 1},
                    "pw": {"out": (1, 4, 4, 8), "kernel": (1, 1), "cin": 8},
                    "fc": {"out": (1, 10), "kernel": (1, 1), "cin": 32}}


def elementwise_model() -> bytes:
    """x (1, 4, 4, 6): hard swish, logistic, tanh, mul, sub, concatenation with x, pad,
    relu, mean over H and W -> (1, 12)."""
    b = TfliteBuilder()
    x = b.tensor("x", (1, 4, 4, 6))
    h, s, t, m, d = (b.tensor(n, (1, 4, 4, 6)) for n in ("hswish", "sigmoid", "tanh", "mul", "sub"))
    b.op("HARD_SWISH", [x], [h])
    b.op("LOGISTIC", [x], [s])
    b.op("TANH", [x], [t])
    b.op("MUL", [h, s], [m], "MulOptions")
    b.op("SUB", [m, t], [d], "SubOptions")
    c = b.tensor("concat", (1, 4, 4, 12))
    b.op("CONCATENATION", [d, x], [c], "ConcatenationOptions", Axis=3)
    pads = b.tensor("pads", (4, 2), "int32", data=np.array([[0, 0], [1, 1], [1, 1], [0, 0]], np.int32))
    p = b.tensor("pad", (1, 6, 6, 12))
    b.op("PAD", [c, pads], [p])
    r = b.tensor("relu", (1, 6, 6, 12))
    b.op("RELU", [p], [r])
    axes = b.tensor("axes", (2,), "int32", data=np.array([1, 2], np.int32))
    y = b.tensor("mean", (1, 12))
    b.op("MEAN", [r, axes], [y], "ReducerOptions", KeepDims=False)
    return b.build([x], [y])


def _per_channel(w: np.ndarray, axis: int):
    """int8 weights and their symmetric per-channel scales along ``axis``."""
    other = tuple(i for i in range(w.ndim) if i != axis)
    scale = np.abs(w).max(axis=other) / 127.0
    shape = [1] * w.ndim
    shape[axis] = -1
    return np.clip(np.round(w / scale.reshape(shape)), -127, 127).astype(np.int8), scale.astype(np.float32)


def int8_cnn(seed: int = 0) -> bytes:
    """The float CNN quantized as TFLite's converter does (int8 activations with a scale and zero
    point, per-channel int8 conv filters, int32 biases), with QUANTIZE in front; outputs the int8
    softmax and the fully connected layer's logits dequantized (DEQUANTIZE)."""
    rng = np.random.default_rng(seed)
    b = TfliteBuilder()
    x = b.tensor("x", (1, 8, 8, 3))
    sx = 1 / 127
    xq = b.tensor("x_int8", (1, 8, 8, 3), "int8", scale=sx, zero_point=0)
    b.op("QUANTIZE", [x], [xq])

    def conv(name, src, s_in, shape, out, s_out, z_out, depthwise=False, stride=1, act=NONE, padding=SAME):
        w, sw = _per_channel(_weights(rng, shape), 3 if depthwise else 0)
        bias = np.round(_weights(rng, (shape[3] if depthwise else shape[0],)) / (s_in * sw)).astype(np.int32)
        wt = b.tensor(f"{name}/w", shape, "int8", data=w, scale=sw, zero_point=np.zeros(sw.size), axis=3 if depthwise else 0)
        bt = b.tensor(f"{name}/b", bias.shape, "int32", data=bias, scale=s_in * sw, zero_point=np.zeros(sw.size))
        y = b.tensor(f"{name}/out", out, "int8", scale=s_out, zero_point=z_out)
        if depthwise:
            b.op("DEPTHWISE_CONV_2D", [src, wt, bt], [y], "DepthwiseConv2DOptions", Padding=padding, StrideH=stride,
                 StrideW=stride, DepthMultiplier=1, FusedActivationFunction=act, DilationHFactor=1, DilationWFactor=1)
        else:
            b.op("CONV_2D", [src, wt, bt], [y], "Conv2DOptions", Padding=padding, StrideH=stride, StrideW=stride,
                 FusedActivationFunction=act, DilationHFactor=1, DilationWFactor=1)
        return y

    s6 = 6 / 255
    c1 = conv("conv1", xq, sx, (8, 3, 3, 3), (1, 8, 8, 8), s6, -128, act=RELU6)
    d = conv("dw", c1, s6, (1, 3, 3, 8), (1, 4, 4, 8), s6, -128, depthwise=True, stride=2, act=RELU)
    p = conv("pw", d, s6, (8, 1, 1, 8), (1, 4, 4, 8), 4 / 255, 0, padding=VALID)
    s_add = 8 / 255
    a = b.tensor("block/add", (1, 4, 4, 8), "int8", scale=s_add, zero_point=-20)
    b.op("ADD", [d, p], [a], "AddOptions")
    r = b.tensor("block/relu6", (1, 4, 4, 8), "int8", scale=s_add, zero_point=-20)
    b.op("RELU6", [a], [r])
    ap = b.tensor("avg", (1, 2, 2, 8), "int8", scale=s_add, zero_point=-20)
    b.op("AVERAGE_POOL_2D", [r], [ap], "Pool2DOptions", Padding=VALID, StrideH=2, StrideW=2, FilterHeight=2,
         FilterWidth=2)
    mp = b.tensor("max", (1, 2, 2, 8), "int8", scale=s_add, zero_point=-20)
    b.op("MAX_POOL_2D", [ap], [mp], "Pool2DOptions", Padding=SAME, StrideH=1, StrideW=1, FilterHeight=2,
         FilterWidth=2)
    shape = b.tensor("flat/shape", (2,), "int32", data=np.array([1, 32], np.int32))
    f = b.tensor("flat", (1, 32), "int8", scale=s_add, zero_point=-20)
    b.op("RESHAPE", [mp, shape], [f])
    wf = _weights(rng, (10, 32))
    sw = np.float32(np.abs(wf).max() / 127)
    wq = np.clip(np.round(wf / sw), -127, 127).astype(np.int8)
    wft = b.tensor("fc/w", (10, 32), "int8", data=wq, scale=sw, zero_point=0)
    bft = b.tensor("fc/b", (10,), "int32", data=np.round(_weights(rng, (10,)) / (s_add * sw)).astype(np.int32),
                   scale=s_add * sw, zero_point=0)
    logits = b.tensor("fc/out", (1, 10), "int8", scale=10 / 255, zero_point=5)
    b.op("FULLY_CONNECTED", [f, wft, bft], [logits], "FullyConnectedOptions")
    probs = b.tensor("probs", (1, 10), "int8", scale=1 / 256, zero_point=-128)
    b.op("SOFTMAX", [logits], [probs], "SoftmaxOptions", Beta=1.0)
    real = b.tensor("logits", (1, 10))
    b.op("DEQUANTIZE", [logits], [real])
    return b.build([x], [probs, real])


def int8_elementwise_model() -> bytes:
    """x (1, 4, 4, 6) quantized: hard swish, logistic, mul, concatenation with x, pad, relu,
    mean over H and W -> (1, 12); tanh and sub of x as two more outputs. Scales as TFLite's
    int8 kernels require them (logistic 1/256 and tanh 1/128 outputs, one scale through
    concatenation)."""
    b = TfliteBuilder()
    x = b.tensor("x", (1, 4, 4, 6))
    s = 1 / 64
    xq = b.tensor("xq", (1, 4, 4, 6), "int8", scale=s, zero_point=0)
    b.op("QUANTIZE", [x], [xq])
    h = b.tensor("hswish", (1, 4, 4, 6), "int8", scale=s, zero_point=0)
    b.op("HARD_SWISH", [xq], [h])
    g = b.tensor("sigmoid", (1, 4, 4, 6), "int8", scale=1 / 256, zero_point=-128)
    b.op("LOGISTIC", [xq], [g])
    m = b.tensor("mul", (1, 4, 4, 6), "int8", scale=s, zero_point=0)
    b.op("MUL", [h, g], [m], "MulOptions")
    c = b.tensor("concat", (1, 4, 4, 12), "int8", scale=s, zero_point=0)
    b.op("CONCATENATION", [m, xq], [c], "ConcatenationOptions", Axis=3)
    pads = b.tensor("pads", (4, 2), "int32", data=np.array([[0, 0], [1, 1], [1, 1], [0, 0]], np.int32))
    p = b.tensor("pad", (1, 6, 6, 12), "int8", scale=s, zero_point=0)
    b.op("PAD", [c, pads], [p])
    r = b.tensor("relu", (1, 6, 6, 12), "int8", scale=s, zero_point=0)
    b.op("RELU", [p], [r])
    axes = b.tensor("axes", (2,), "int32", data=np.array([1, 2], np.int32))
    y = b.tensor("mean", (1, 12), "int8", scale=1 / 128, zero_point=-10)
    b.op("MEAN", [r, axes], [y], "ReducerOptions", KeepDims=False)
    t = b.tensor("tanh", (1, 4, 4, 6), "int8", scale=1 / 128, zero_point=0)
    b.op("TANH", [xq], [t])
    d = b.tensor("sub", (1, 4, 4, 6), "int8", scale=1 / 32, zero_point=3)
    b.op("SUB", [m, xq], [d], "SubOptions")
    return b.build([x], [y, t, d])


def hybrid_fc_model() -> bytes:
    """Dynamic-range quantization: float x (2, 16), int8 weights (per channel) and a float bias."""
    rng = np.random.default_rng(3)
    b = TfliteBuilder()
    x = b.tensor("x", (2, 16))
    w, sw = _per_channel(_weights(rng, (5, 16)), 0)
    wt = b.tensor("fc/w", (5, 16), "int8", data=w, scale=sw, zero_point=np.zeros(5), axis=0)
    bt = b.tensor("fc/b", (5,), data=_weights(rng, (5,)))
    y = b.tensor("y", (2, 5))
    b.op("FULLY_CONNECTED", [x, wt, bt], [y], "FullyConnectedOptions", FusedActivationFunction=RELU)
    return b.build([x], [y])


def hybrid_conv_model() -> bytes:
    """Dynamic-range quantization of convs: float x (2, 6, 6, 3), a 3x3 conv and a depthwise
    conv with int8 per-channel filters and float biases."""
    rng = np.random.default_rng(4)
    b = TfliteBuilder()
    x = b.tensor("x", (2, 6, 6, 3))
    w, sw = _per_channel(_weights(rng, (4, 3, 3, 3)), 0)
    wt = b.tensor("conv/w", (4, 3, 3, 3), "int8", data=w, scale=sw, zero_point=np.zeros(4), axis=0)
    bt = b.tensor("conv/b", (4,), data=_weights(rng, (4,)))
    c = b.tensor("conv/out", (2, 6, 6, 4))
    b.op("CONV_2D", [x, wt, bt], [c], "Conv2DOptions", Padding=SAME, StrideH=1, StrideW=1,
         FusedActivationFunction=RELU6, DilationHFactor=1, DilationWFactor=1)
    wd, sd = _per_channel(_weights(rng, (1, 3, 3, 4)), 3)
    wdt = b.tensor("dw/w", (1, 3, 3, 4), "int8", data=wd, scale=sd, zero_point=np.zeros(4), axis=3)
    bdt = b.tensor("dw/b", (4,), data=_weights(rng, (4,)))
    y = b.tensor("dw/out", (2, 2, 2, 4))
    b.op("DEPTHWISE_CONV_2D", [c, wdt, bdt], [y], "DepthwiseConv2DOptions", Padding=VALID, StrideH=2, StrideW=2,
         DepthMultiplier=1, DilationHFactor=1, DilationWFactor=1)
    return b.build([x], [y])


def math_model() -> bytes:
    """x (1, 4, 4, 6) through the ops of ``math_ops``: every result is a graph output."""
    rng = np.random.default_rng(5)
    b = TfliteBuilder()
    x = b.tensor("x", (1, 4, 4, 6))
    outputs = []

    def out(name, shape, op, inputs, options=None, **fields):
        t = b.tensor(name, shape)
        b.op(op, inputs, [t], options, **fields)
        outputs.append(t)
        return t

    same = (1, 4, 4, 6)
    a = out("abs", same, "ABS", [x])
    s = out("sqrt", same, "SQRT", [a])
    e = out("exp", same, "EXP", [x])
    out("rsqrt", same, "RSQRT", [e])
    out("log", same, "LOG", [e])
    hi = out("maximum", same, "MAXIMUM", [x, s])
    lo = out("minimum", same, "MINIMUM", [x, s])
    out("div", same, "DIV", [hi, e], "DivOptions", FusedActivationFunction=RELU)
    out("squared_difference", same, "SQUARED_DIFFERENCE", [hi, lo])
    out("square", same, "SQUARE", [x])
    out("neg", same, "NEG", [x])
    for op in ("SIN", "COS", "FLOOR"):
        out(op.lower(), same, op, [x])
    out("pow", same, "POW", [s, e])
    out("leaky_relu", same, "LEAKY_RELU", [x], "LeakyReluOptions", Alpha=0.1)
    alpha = b.tensor("alpha", (6,), data=_weights(rng, (6,)))
    out("prelu", same, "PRELU", [x, alpha])
    out("gelu", same, "GELU", [x], "GeluOptions", Approximate=False)
    out("log_softmax", same, "LOG_SOFTMAX", [x])
    hw = b.tensor("hw", (2,), "int32", data=np.array([1, 2], np.int32))
    out("sum", (1, 1, 1, 6), "SUM", [x, hw], "ReducerOptions", KeepDims=True)
    last = b.tensor("last", (1,), "int32", data=np.array([3], np.int32))
    out("reduce_max", (1, 4, 4), "REDUCE_MAX", [x, last], "ReducerOptions", KeepDims=False)
    out("reduce_min", (1, 4, 4), "REDUCE_MIN", [x, last], "ReducerOptions", KeepDims=False)
    perm = b.tensor("perm", (4,), "int32", data=np.array([0, 3, 1, 2], np.int32))
    t = out("transpose", (1, 6, 4, 4), "TRANSPOSE", [x, perm])
    out("batch_matmul", (1, 6, 4, 4), "BATCH_MATMUL", [t, t], "BatchMatMulOptions", AdjX=False, AdjY=True)
    for name, op, size, options in (("bilinear_half", "RESIZE_BILINEAR", (8, 8), {"HalfPixelCenters": True}),
                                    ("bilinear_aligned", "RESIZE_BILINEAR", (7, 7), {"AlignCorners": True}),
                                    ("bilinear", "RESIZE_BILINEAR", (6, 6), {}),
                                    ("nearest", "RESIZE_NEAREST_NEIGHBOR", (7, 7), {}),
                                    ("nearest_half", "RESIZE_NEAREST_NEIGHBOR", (6, 6), {"HalfPixelCenters": True}),
                                    ("nearest_aligned", "RESIZE_NEAREST_NEIGHBOR", (7, 7), {"AlignCorners": True})):
        sizes = b.tensor(f"{name}/size", (2,), "int32", data=np.array(size, np.int32))
        kind = "ResizeBilinearOptions" if op == "RESIZE_BILINEAR" else "ResizeNearestNeighborOptions"
        out(name, (1, *size, 6), op, [x, sizes], kind, **options)
    return b.build([x], outputs)


def shape_model() -> bytes:
    """x (1, 6, 6, 4) through SLICE, STRIDED_SLICE (masks, a negative stride, a shrunk axis),
    SPLIT, PACK, UNPACK, GATHER, SQUEEZE, EXPAND_DIMS, PADV2, RELU_N1_TO_1 and TRANSPOSE_CONV
    (SAME, stride 2): every result is a graph output."""
    rng = np.random.default_rng(6)
    b = TfliteBuilder()
    x = b.tensor("x", (1, 6, 6, 4))
    outputs = []

    def ints(name, values):
        return b.tensor(name, (len(values),), "int32", data=np.array(values, np.int32))

    def out(name, shape, op, inputs, options=None, **fields):
        t = b.tensor(name, shape)
        b.op(op, inputs, [t], options, **fields)
        outputs.append(t)
        return t

    out("slice", (1, 3, 4, 2), "SLICE", [x, ints("s/begin", [0, 1, 2, 1]), ints("s/size", [1, 3, -1, 2])])
    out("strided", (1, 3, 2, 4), "STRIDED_SLICE",
        [x, ints("ss/begin", [0, 5, 0, 0]), ints("ss/end", [1, 0, 6, 4]), ints("ss/strides", [1, -2, 3, 1])],
        "StridedSliceOptions", BeginMask=0b1000, EndMask=0b1000)
    out("strided_shrink", (1, 6, 4), "STRIDED_SLICE",
        [x, ints("sh/begin", [0, 0, -1, 0]), ints("sh/end", [1, 6, 0, 4]), ints("sh/strides", [1, 1, 1, 1])],
        "StridedSliceOptions", ShrinkAxisMask=0b0100)
    parts = [b.tensor(f"split_{i}", (1, 6, 6, 2)) for i in range(2)]
    b.op("SPLIT", [ints("split/axis", [3]), x], parts, "SplitOptions", NumSplits=2)
    outputs += parts
    out("pack", (2, 1, 6, 6, 2), "PACK", parts, "PackOptions", ValuesCount=2, Axis=0)
    rows = [b.tensor(f"unpack_{i}", (1, 6, 4)) for i in range(6)]
    b.op("UNPACK", [x], rows, "UnpackOptions", Num=6, Axis=2)
    outputs += rows[:2]
    out("gather", (1, 6, 3, 4), "GATHER", [x, ints("g/indices", [5, 0, 2])], "GatherOptions", Axis=2)
    sq = out("squeeze", (6, 6, 4), "SQUEEZE", [x], "SqueezeOptions")
    out("expand_dims", (6, 1, 6, 4), "EXPAND_DIMS", [sq, ints("e/axis", [1])])
    pads = b.tensor("p/pads", (4, 2), "int32", data=np.array([[0, 0], [2, 1], [0, 1], [1, 0]], np.int32))
    fill = b.tensor("p/value", (1,), data=np.array([0.75], np.float32))
    out("padv2", (1, 9, 7, 5), "PADV2", [x, pads, fill])
    out("relu_n1_to_1", (1, 6, 6, 4), "RELU_N1_TO_1", [x])
    w = b.tensor("tconv/w", (3, 3, 3, 4), data=_weights(rng, (3, 3, 3, 4)))
    shape = ints("tconv/shape", [1, 12, 12, 3])
    out("tconv", (1, 12, 12, 3), "TRANSPOSE_CONV", [shape, w, x], "TransposeConvOptions", Padding=SAME,
        StrideH=2, StrideW=2)
    return b.build([x], outputs)


def uint8_conv_model() -> bytes:
    """The older uint8 quantization: x quantized to uint8 (zero point 128), a 3x3 conv with
    uint8 weights (zero point 131, one scale), a fully connected layer, relu6; uint8 out."""
    rng = np.random.default_rng(7)
    b = TfliteBuilder()
    x = b.tensor("x", (1, 5, 5, 2))
    sx = 2 / 255
    xq = b.tensor("xq", (1, 5, 5, 2), "uint8", scale=sx, zero_point=128)
    b.op("QUANTIZE", [x], [xq])
    sw = 0.3 / 127
    w = np.clip(np.round(_weights(rng, (3, 3, 3, 2)) / sw) + 131, 0, 255).astype(np.uint8)
    wt = b.tensor("conv/w", (3, 3, 3, 2), "uint8", data=w, scale=sw, zero_point=131)
    bt = b.tensor("conv/b", (3,), "int32", data=np.round(_weights(rng, (3,)) / (sx * sw)).astype(np.int32),
                  scale=sx * sw, zero_point=0)
    c = b.tensor("conv/out", (1, 5, 5, 3), "uint8", scale=6 / 255, zero_point=0)
    b.op("CONV_2D", [xq, wt, bt], [c], "Conv2DOptions", Padding=SAME, StrideH=1, StrideW=1,
         FusedActivationFunction=RELU6, DilationHFactor=1, DilationWFactor=1)
    flat = b.tensor("flat", (1, 75), "uint8", scale=6 / 255, zero_point=0)
    b.op("RESHAPE", [c, b.tensor("flat/shape", (2,), "int32", data=np.array([1, 75], np.int32))], [flat])
    sf = 0.2 / 127
    wf = np.clip(np.round(_weights(rng, (4, 75), 0.2) / sf) + 125, 0, 255).astype(np.uint8)
    wft = b.tensor("fc/w", (4, 75), "uint8", data=wf, scale=sf, zero_point=125)
    bft = b.tensor("fc/b", (4,), "int32", data=np.zeros(4, np.int32), scale=(6 / 255) * sf, zero_point=0)
    y = b.tensor("fc/out", (1, 4), "uint8", scale=8 / 255, zero_point=100)
    b.op("FULLY_CONNECTED", [flat, wft, bft], [y], "FullyConnectedOptions")
    return b.build([x], [y])
