"""The table ``runtime op -> emitter`` that export uses.

An emitter is ``fn(b, node, ins, outs)``: ``b`` is the exporter's Builder, ``node`` the graph
node (its attrs and the shapes/dtypes of its values), ``ins`` the ONNX names of its inputs
(None for an absent optional one) and ``outs`` the names it must write. Most ops are one ONNX
node; ops ONNX lacks (silu, rms_norm, scaled dot-product attention before opset 23...) are
written as the short chain of ONNX ops that computes them. Where the runtime promotes dtypes
(int64 + float32) and ONNX does not, a Cast comes first.
"""

from __future__ import annotations

import math

import numpy as np

from .. import dtypes as _dt
from ..errors import UnsupportedOpError
from ..graph.ir import Value

EMITTERS: dict = {}
INT64_MIN = np.iinfo(np.int64).min


def emitter(*names: str):
    def decorate(fn):
        for name in names:
            if name in EMITTERS:
                raise ValueError(f"op {name!r} already has an emitter")
            EMITTERS[name] = fn
        return fn

    return decorate


def _unsupported(node, detail: str) -> UnsupportedOpError:
    return UnsupportedOpError(f"export: {node.op_name} node %{node.name} ({node.scope or 'top level'}): {detail}")


def _as(b, node, ins, i: int, dtype) -> str:
    """Input ``i`` cast to ``dtype``."""
    return b.cast(ins[i], node.inputs[i].dtype, dtype)


def _axes_input_or_attr(b, axes, since: int = 18) -> dict:
    """How a reduction takes ``axes``: an input from opset ``since``, an attribute before."""
    if b.opset >= since:
        return {"input": b.ints(axes)}
    return {"attr": list(axes)}


def reduce_node(b, op_type: str, x: str, axes, keepdims: bool, outputs=None, since: int = 18):
    how = _axes_input_or_attr(b, axes, since)
    inputs = [x] + ([how["input"]] if "input" in how else [])
    return b.add(op_type, inputs, outputs, keepdims=int(keepdims), axes=how.get("attr"))


# --- elementwise -------------------------------------------------------------------------------

_BINARY = {"add": "Add", "sub": "Sub", "mul": "Mul", "div": "Div", "maximum": "Max", "minimum": "Min"}
_COMPARE = {"eq": "Equal", "lt": "Less", "le": "LessOrEqual", "gt": "Greater", "ge": "GreaterOrEqual"}
_LOGIC = {"logical_and": "And", "logical_or": "Or", "logical_xor": "Xor"}
_UNARY = {"neg": "Neg", "abs": "Abs", "sign": "Sign", "exp": "Exp", "log": "Log", "sqrt": "Sqrt",
          "reciprocal": "Reciprocal", "sin": "Sin", "cos": "Cos", "tanh": "Tanh", "erf": "Erf",
          "floor": "Floor", "ceil": "Ceil", "round": "Round", "isnan": "IsNaN", "isinf": "IsInf",
          "relu": "Relu", "sigmoid": "Sigmoid"}


@emitter(*_BINARY)
def binary(b, node, ins, outs):
    dtype = node.outputs[0].dtype  # the runtime's promoted type (int / int divides to float)
    b.add(_BINARY[node.op_name], [_as(b, node, ins, 0, dtype), _as(b, node, ins, 1, dtype)], outs)


@emitter("pow")
def pow_(b, node, ins, outs):
    b.add("Pow", [_as(b, node, ins, 0, node.outputs[0].dtype), ins[1]], outs)


@emitter(*_COMPARE, "ne")
def compare(b, node, ins, outs):
    dtype = _dt.promote(node.inputs[0].dtype, node.inputs[1].dtype)
    a, c = _as(b, node, ins, 0, dtype), _as(b, node, ins, 1, dtype)
    if node.op_name == "ne":
        b.add("Not", [b.add("Equal", [a, c])], outs)
    else:
        b.add(_COMPARE[node.op_name], [a, c], outs)


@emitter(*_LOGIC)
def logic(b, node, ins, outs):
    b.add(_LOGIC[node.op_name], [_as(b, node, ins, 0, _dt.bool_), _as(b, node, ins, 1, _dt.bool_)], outs)


@emitter("logical_not")
def logical_not(b, node, ins, outs):
    b.add("Not", [_as(b, node, ins, 0, _dt.bool_)], outs)


@emitter(*_UNARY)
def unary(b, node, ins, outs):
    out = node.outputs[0].dtype
    x = ins[0] if out is _dt.bool_ else _as(b, node, ins, 0, out)  # exp(int) is float, as the runtime
    b.add(_UNARY[node.op_name], [x], outs)


@emitter("rsqrt")
def rsqrt(b, node, ins, outs):
    b.add("Reciprocal", [b.add("Sqrt", [_as(b, node, ins, 0, node.outputs[0].dtype)])], outs)


@emitter("floor_divide")
def floor_divide(b, node, ins, outs):
    dtype = node.outputs[0].dtype
    if dtype.is_floating_point:
        b.add("Floor", [b.add("Div", [_as(b, node, ins, 0, dtype), _as(b, node, ins, 1, dtype)])], outs)
        return
    # ONNX divides integers toward zero; in float64 the floor is exact for |values| < 2**53
    q = b.add("Floor", [b.add("Div", [_as(b, node, ins, 0, _dt.float64), _as(b, node, ins, 1, _dt.float64)])])
    b.add("Cast", [q], outs, to=_onnx_type(dtype))


@emitter("remainder")
def remainder(b, node, ins, outs):
    dtype = node.outputs[0].dtype
    a, c = _as(b, node, ins, 0, dtype), _as(b, node, ins, 1, dtype)
    if not dtype.is_floating_point:
        b.add("Mod", [a, c], outs, fmod=0)  # the sign of the divisor, as Python's %
        return
    # ONNX's float Mod is C's fmod; Python's remainder is a - b·floor(a / b)
    b.add("Sub", [a, b.add("Mul", [c, b.add("Floor", [b.add("Div", [a, c])])])], outs)


@emitter("where")
def where(b, node, ins, outs):
    dtype = node.outputs[0].dtype
    b.add("Where", [ins[0], _as(b, node, ins, 1, dtype), _as(b, node, ins, 2, dtype)], outs)


@emitter("clamp")
def clamp(b, node, ins, outs):
    dtype = node.inputs[0].dtype
    low, high = node.attrs.get("min"), node.attrs.get("max")
    b.add("Clip", [ins[0], None if low is None else b.scalar(low, dtype),
                   None if high is None else b.scalar(high, dtype)], outs)


@emitter("hardtanh")
def hardtanh(b, node, ins, outs):
    dtype = node.inputs[0].dtype
    b.add("Clip", [ins[0], b.scalar(node.attrs["min_val"], dtype), b.scalar(node.attrs["max_val"], dtype)], outs)


def _onnx_type(dtype) -> int:
    from .elem_types import from_dtype

    return from_dtype(dtype)


@emitter("cast")
def cast(b, node, ins, outs):
    b.add("Cast", ins, outs, to=_onnx_type(node.outputs[0].dtype))


@emitter("contiguous")
def contiguous(b, node, ins, outs):
    b.add("Identity", ins, outs)


# --- activations -------------------------------------------------------------------------------

@emitter("leaky_relu")
def leaky_relu(b, node, ins, outs):
    b.add("LeakyRelu", ins, outs, alpha=float(node.attrs["negative_slope"]))


@emitter("prelu")
def prelu(b, node, ins, outs):
    x, w = node.inputs
    slope = ins[1]
    if w.numel() > 1:  # one slope per channel (dim 1): (C, 1, ..., 1) broadcasts from the right
        slope = b.add("Reshape", [slope, b.ints((w.numel(),) + (1,) * (x.ndim - 2))])
    b.add("PRelu", [ins[0], slope], outs)


@emitter("elu")
def elu(b, node, ins, outs):
    from ..ops.activations import SELU_ALPHA, SELU_SCALE

    alpha, scale, input_scale = node.attrs["alpha"], node.attrs["scale"], node.attrs["input_scale"]
    if scale == 1 and input_scale == 1:
        b.add("Elu", ins, outs, alpha=float(alpha))
    elif input_scale == 1 and alpha == SELU_ALPHA and scale == SELU_SCALE:
        b.add("Selu", ins, outs, alpha=float(alpha), gamma=float(scale))
    elif scale == 1 and math.isclose(input_scale, 1 / alpha):
        b.add("Celu", ins, outs, alpha=float(alpha))
    else:  # scale·elu(input_scale·x, alpha) with the scales as multiplies
        dtype = node.inputs[0].dtype
        x = b.add("Mul", [ins[0], b.scalar(input_scale, dtype)])
        y = b.add("Elu", [x], alpha=float(alpha))
        positive = b.add("Greater", [ins[0], b.scalar(0, dtype)])
        y = b.add("Where", [positive, ins[0], b.add("Div", [y, b.scalar(input_scale, dtype)])])
        b.add("Mul", [y, b.scalar(scale, dtype)], outs)


_SQRT_2_OVER_PI = math.sqrt(2 / math.pi)


@emitter("gelu")
def gelu(b, node, ins, outs):
    approximate = node.attrs["approximate"]
    if b.opset >= 20:
        b.add("Gelu", ins, outs, approximate=approximate)
        return
    dtype = node.inputs[0].dtype
    x = ins[0]
    half_x = b.add("Mul", [x, b.scalar(0.5, dtype)])
    if approximate == "tanh":  # 0.5·x·(1 + tanh(sqrt(2/pi)·(x + 0.044715·x³)))
        cube = b.add("Mul", [b.add("Mul", [x, x]), x])
        inner = b.add("Add", [x, b.add("Mul", [cube, b.scalar(0.044715, dtype)])])
        t = b.add("Tanh", [b.add("Mul", [inner, b.scalar(_SQRT_2_OVER_PI, dtype)])])
    else:  # 0.5·x·(1 + erf(x / sqrt(2)))
        t = b.add("Erf", [b.add("Mul", [x, b.scalar(1 / math.sqrt(2), dtype)])])
    b.add("Mul", [half_x, b.add("Add", [t, b.scalar(1.0, dtype)])], outs)


@emitter("silu")
def silu(b, node, ins, outs):
    b.add("Mul", [ins[0], b.add("Sigmoid", ins)], outs)


@emitter("hardsigmoid")
def hardsigmoid(b, node, ins, outs):
    b.add("HardSigmoid", ins, outs, alpha=1 / 6, beta=0.5)


@emitter("hardswish")
def hardswish(b, node, ins, outs):
    if b.opset >= 14:
        b.add("HardSwish", ins, outs)
    else:  # x·hardsigmoid(x)
        b.add("Mul", [ins[0], b.add("HardSigmoid", ins, alpha=1 / 6, beta=0.5)], outs)


@emitter("softplus")
def softplus(b, node, ins, outs):
    beta = node.attrs["beta"]
    if beta == 1:
        b.add("Softplus", ins, outs)  # exact log(1 + exp(x)); the runtime's threshold only avoids overflow
        return
    dtype = node.inputs[0].dtype
    scaled = b.add("Softplus", [b.add("Mul", [ins[0], b.scalar(beta, dtype)])])
    b.add("Div", [scaled, b.scalar(beta, dtype)], outs)


@emitter("mish")
def mish(b, node, ins, outs):
    if b.opset >= 18:
        b.add("Mish", ins, outs)
    else:
        b.add("Mul", [ins[0], b.add("Tanh", [b.add("Softplus", ins)])], outs)


@emitter("softmax", "log_softmax")
def softmax(b, node, ins, outs):
    b.add("Softmax" if node.op_name == "softmax" else "LogSoftmax", ins, outs, axis=node.attrs["dim"])


# --- linear algebra ----------------------------------------------------------------------------

@emitter("matmul")
def matmul(b, node, ins, outs):
    b.add("MatMul", ins, outs)


@emitter("linear")
def linear(b, node, ins, outs):
    x, w = node.inputs[0], node.inputs[1]
    if x.ndim == 2:
        b.add("Gemm", ins, outs, transB=1)
        return
    # a Gemm on the rows, so the file keeps one op per linear layer (and imports back as linear)
    rows = b.add("Reshape", [ins[0], b.ints((-1, w.shape[1]))])
    y = b.add("Gemm", [rows, ins[1], ins[2]], transB=1)
    b.add("Reshape", [y, b.ints(node.outputs[0].shape)], outs)


@emitter("einsum")
def einsum(b, node, ins, outs):
    b.add("Einsum", ins, outs, equation=node.attrs["equation"])


@emitter("dequantize", "quantized_linear")
def quantized(b, node, ins, outs):
    # blockwise int4/float8 weights are DequantizeLinear with block_size from opset 21 on
    raise _unsupported(node, f"weights stored as {node.inputs[1 if node.op_name == 'quantized_linear' else 0].dtype.name} "
                             f"with block scales have no export yet; export the model before quantize_weights")


@emitter("embedding")
def embedding(b, node, ins, outs):
    b.add("Gather", ins, outs, axis=0)


# --- convolution, normalization, pooling ---------------------------------------------------------

@emitter("conv")
def conv(b, node, ins, outs):
    a = node.attrs
    b.add("Conv", ins, outs, kernel_shape=list(node.inputs[1].shape[2:]), strides=list(a["stride"]),
          pads=list(a["padding"]) * 2, dilations=list(a["dilation"]), group=a["groups"])


@emitter("conv_transpose")
def conv_transpose(b, node, ins, outs):
    a = node.attrs
    b.add("ConvTranspose", ins, outs, kernel_shape=list(node.inputs[1].shape[2:]), strides=list(a["stride"]),
          pads=list(a["padding"]) * 2, output_padding=list(a["output_padding"]),
          dilations=list(a["dilation"]), group=a["groups"])


@emitter("batch_norm")
def batch_norm(b, node, ins, outs):
    if node.attrs["training"]:
        raise _unsupported(node, "batch norm in training mode (batch statistics); export the model in eval()")
    x = node.inputs[0]
    c, dtype = x.shape[1], x.dtype
    scale = ins[1] or b.const(np.ones(c, dtype.np), "bn_scale")
    bias = ins[2] or b.const(np.zeros(c, dtype.np), "bn_bias")
    b.add("BatchNormalization", [ins[0], scale, bias, ins[3], ins[4]], outs, epsilon=node.attrs["eps"])


def _standardize(b, x: str, axes, eps: float, dtype, out=None):
    """(x − mean) / sqrt(var + eps) over ``axes`` (biased variance)."""
    centered = b.add("Sub", [x, reduce_node(b, "ReduceMean", x, axes, True)])
    var = reduce_node(b, "ReduceMean", b.add("Mul", [centered, centered]), axes, True)
    std = b.add("Sqrt", [b.add("Add", [var, b.scalar(eps, dtype)])])
    return b.add("Div", [centered, std], out)


@emitter("layer_norm")
def layer_norm(b, node, ins, outs):
    x = node.inputs[0]
    k = len(node.attrs["normalized_shape"])
    eps = node.attrs["eps"]
    if b.opset >= 17:
        scale = ins[1] or b.const(np.ones(node.attrs["normalized_shape"], x.dtype.np), "ln_scale")
        b.add("LayerNormalization", [ins[0], scale] + ([ins[2]] if ins[2] else []), outs, axis=-k, epsilon=eps)
        return
    _affine(b, _standardize(b, ins[0], range(x.ndim - k, x.ndim), eps, x.dtype), ins[1], ins[2], outs)


def _affine(b, y: str, weight, bias, outs):
    if weight is None and bias is None:
        return b.add("Identity", [y], outs)
    if weight is not None:
        y = b.add("Mul", [y, weight], None if bias is not None else outs)
    if bias is not None:
        y = b.add("Add", [y, bias], outs)
    return y


@emitter("group_norm")
def group_norm(b, node, ins, outs):
    x = node.inputs[0]
    groups, eps = node.attrs["num_groups"], node.attrs["eps"]
    n, c = x.shape[0], x.shape[1]
    # an instance norm over (N, groups, rest) standardizes each group; then the per-channel affine
    grouped = b.add("Reshape", [ins[0], b.ints((n, groups, -1))])
    ones, zeros = b.const(np.ones(groups, x.dtype.np), "gn_scale"), b.const(np.zeros(groups, x.dtype.np), "gn_bias")
    y = b.add("InstanceNormalization", [grouped, ones, zeros], epsilon=eps)
    y = b.add("Reshape", [y, b.ints(x.shape)])
    view = b.ints((c,) + (1,) * (x.ndim - 2))
    weight = None if ins[1] is None else b.add("Reshape", [ins[1], view])
    bias = None if ins[2] is None else b.add("Reshape", [ins[2], view])
    _affine(b, y, weight, bias, outs)


@emitter("rms_norm")
def rms_norm(b, node, ins, outs):
    x = node.inputs[0]
    k = len(node.attrs["normalized_shape"])
    square = reduce_node(b, "ReduceMean", b.add("Mul", [ins[0], ins[0]]), range(x.ndim - k, x.ndim), True)
    rstd = b.add("Reciprocal", [b.add("Sqrt", [b.add("Add", [square, b.scalar(node.attrs["eps"], x.dtype)])])])
    _affine(b, b.add("Mul", [ins[0], rstd]), ins[1], None, outs)


@emitter("max_pool")
def max_pool(b, node, ins, outs):
    a = node.attrs
    b.add("MaxPool", ins, outs, kernel_shape=list(a["kernel_size"]), strides=list(a["stride"]),
          pads=list(a["padding"]) * 2, dilations=list(a["dilation"]), ceil_mode=int(a["ceil_mode"]))


@emitter("avg_pool")
def avg_pool(b, node, ins, outs):
    a = node.attrs
    attrs = dict(kernel_shape=list(a["kernel_size"]), strides=list(a["stride"]), pads=list(a["padding"]) * 2,
                 ceil_mode=int(a["ceil_mode"]))
    if a["divisor_override"] is None:
        b.add("AveragePool", ins, outs, count_include_pad=int(a["count_include_pad"]), **attrs)
        return
    # a fixed divisor: the window sum (mean over the full window times its size) over it
    y = b.add("AveragePool", ins, count_include_pad=1, **attrs)
    factor = math.prod(a["kernel_size"]) / a["divisor_override"]
    b.add("Mul", [y, b.scalar(factor, node.inputs[0].dtype)], outs)


def _adaptive_as_pool(b, node, ins, outs, op_type: str):
    x = node.inputs[0]
    sizes, out = x.shape[2:], node.attrs["output_size"]
    if all(o == 1 for o in out):
        b.add("Global" + op_type, ins, outs)
    elif all(n % o == 0 for n, o in zip(sizes, out)):  # equal windows: an ordinary pooling
        kernel = [n // o for n, o in zip(sizes, out)]
        b.add(op_type, ins, outs, kernel_shape=kernel, strides=kernel)
    else:
        raise _unsupported(node, f"adaptive pooling of {x.shape} to {out} has unequal windows, which no "
                                 f"ONNX pooling op has")


@emitter("adaptive_avg_pool")
def adaptive_avg_pool(b, node, ins, outs):
    _adaptive_as_pool(b, node, ins, outs, "AveragePool")


@emitter("adaptive_max_pool")
def adaptive_max_pool(b, node, ins, outs):
    _adaptive_as_pool(b, node, ins, outs, "MaxPool")


def _resize_sizes(b, node) -> str:
    x = node.inputs[0]
    return b.ints(tuple(x.shape[:2]) + tuple(node.attrs["output_size"]))


def _resize_scales(b, node):
    scales = node.attrs["scales"]
    return None if scales is None else b.const(np.array([1.0, 1.0] + list(scales), np.float32), "scales")


@emitter("upsample_nearest")
def upsample_nearest(b, node, ins, outs):
    # PyTorch's nearest is floor(dst·in/out); nearest-exact is floor((dst + 0.5)·in/out)
    exact = node.attrs["exact"]
    scales = _resize_scales(b, node)
    b.add("Resize", [ins[0], None, scales, None if scales else _resize_sizes(b, node)], outs, mode="nearest",
          coordinate_transformation_mode="half_pixel" if exact else "asymmetric",
          nearest_mode="round_prefer_ceil" if exact else "floor")


@emitter("upsample_bilinear")
def upsample_bilinear(b, node, ins, outs):
    align = node.attrs["align_corners"]
    scales = None if align else _resize_scales(b, node)
    b.add("Resize", [ins[0], None, scales, None if scales else _resize_sizes(b, node)], outs, mode="linear",
          coordinate_transformation_mode="align_corners" if align else "half_pixel")


@emitter("dropout")
def dropout(b, node, ins, outs):
    if node.attrs["training"]:
        raise _unsupported(node, "dropout in training mode draws random masks; export the model in eval()")
    b.add("Identity", ins, [outs[0]])
    mask = node.outputs[1]
    b.add("Expand", [b.const(np.array(True)), b.ints(mask.shape)], [outs[1]])


# --- movement ----------------------------------------------------------------------------------

@emitter("reshape")
def reshape(b, node, ins, outs):
    b.add("Reshape", [ins[0], b.ints(node.attrs["shape"])], outs)


@emitter("permute")
def permute(b, node, ins, outs):
    b.add("Transpose", ins, outs, perm=list(node.attrs["dims"]))


@emitter("expand")
def expand(b, node, ins, outs):
    b.add("Expand", [ins[0], b.ints(node.attrs["shape"])], outs)


@emitter("cat")
def cat(b, node, ins, outs):
    b.add("Concat", ins, outs, axis=node.attrs["dim"])


@emitter("cache_append")
def cache_append(b, node, ins, outs):
    b.add("Concat", ins, outs, axis=node.outputs[0].ndim - 2)  # the in-place write ONNX has no op for


@emitter("flip")
def flip(b, node, ins, outs):
    dims = list(node.attrs["dims"])
    b.add("Slice", [ins[0], b.ints([-1] * len(dims)), b.ints([INT64_MIN] * len(dims)), b.ints(dims),
                    b.ints([-1] * len(dims))], outs)


@emitter("repeat")
def repeat(b, node, ins, outs):
    x = node.inputs[0]
    repeats = node.attrs["repeats"]
    src = ins[0]
    if len(repeats) > x.ndim:  # leading new dims, as torch's repeat
        src = b.add("Reshape", [src, b.ints((1,) * (len(repeats) - x.ndim) + tuple(x.shape))])
    b.add("Tile", [src, b.ints(repeats)], outs)


@emitter("pad")
def pad(b, node, ins, outs):
    pairs = node.attrs["pads"]
    pads = [p for p, _ in pairs] + [q for _, q in pairs]
    b.add("Pad", [ins[0], b.ints(pads), b.scalar(node.attrs["value"], node.inputs[0].dtype)], outs, mode="constant")


@emitter("tril", "triu")
def triangle(b, node, ins, outs):
    upper, k = node.op_name == "triu", node.attrs["diagonal"]
    if b.opset >= 14:
        b.add("Trilu", [ins[0], b.const(np.array(k, np.int64), "k")], outs, upper=int(upper))
        return
    x = node.inputs[0]  # before Trilu: a select with the constant triangle
    rows, cols = x.shape[-2:]
    keep = np.triu(np.ones((rows, cols), bool), k) if upper else np.tril(np.ones((rows, cols), bool), k)
    b.add("Where", [b.const(keep, "triangle"), ins[0], b.scalar(0, x.dtype)], outs)


# --- indexing ----------------------------------------------------------------------------------

def _basic_slices(b, node, x: str, items, shape) -> str:
    """``x`` after the slices and integers of ``items`` (integers as one-element slices, then
    squeezed) and the new axes (None), in one Slice, a Squeeze and an Unsqueeze."""
    starts, ends, axes, steps, squeeze = [], [], [], [], []
    dim = 0
    for it in items:
        kind = it[0]
        if kind == "s":
            start, stop, step = it[1], it[2], it[3]
            if (start, stop, step) != (0, shape[dim], 1):
                starts.append(start)
                ends.append(INT64_MIN if stop < 0 else stop)  # stop -1: before index 0 (negative step)
                axes.append(dim)
                steps.append(step)
            dim += 1
        elif kind == "i":
            starts.append(it[1])
            ends.append(it[1] + 1)
            axes.append(dim)
            steps.append(1)
            squeeze.append(dim)
            dim += 1
        elif kind != "n":
            raise _unsupported(node, f"index item {it} is not a slice, an integer or None")
    if axes:
        x = b.add("Slice", [x, b.ints(starts), b.ints(ends), b.ints(axes), b.ints(steps)])
    if squeeze:
        x = b.add("Squeeze", [x, b.ints(squeeze)])
    # new axes land where they stand among the items that keep a dim
    new, kept = [], 0
    for it in items:
        if it[0] == "n":
            new.append(kept)
            kept += 1
        elif it[0] == "s":
            kept += 1
    if new:
        x = b.add("Unsqueeze", [x, b.ints(new)])
    return x


@emitter("getitem")
def getitem(b, node, ins, outs):
    y = _basic_slices(b, node, ins[0], node.attrs["items"], node.inputs[0].shape)
    b.add("Identity", [y], outs)


def _stacked_indices(b, node, names, values) -> str:
    """Index tensors broadcast together and stacked on a new last dim (GatherND's indices)."""
    from ..ops._helpers import broadcast_shapes

    shape: tuple = ()
    for v in values:
        shape = broadcast_shapes("index", shape, v.shape)
    parts = []
    for name, v in zip(names, values):
        part = b.cast(name, v.dtype, _dt.int64)
        if v.shape != shape:
            part = b.add("Expand", [part, b.ints(shape)])
        parts.append(b.add("Unsqueeze", [part, b.ints([len(shape)])]))
    return parts[0] if len(parts) == 1 else b.add("Concat", parts, axis=len(shape))


@emitter("index")
def index(b, node, ins, outs):
    items = node.attrs["items"]
    x = node.inputs[0]
    tensor_pos = [i for i, it in enumerate(items) if it[0] == "t"]
    basic = [it if it[0] != "t" else ["s", 0, x.shape[i], 1] for i, it in enumerate(items)]
    if any(it[0] in ("n", "i") for it in items):
        raise _unsupported(node, "advanced indexing mixed with integers or None is not supported")
    src = _basic_slices(b, node, ins[0], basic, x.shape)
    if len(tensor_pos) == 1:  # one index tensor: a Gather along its dim
        b.add("Gather", [src, ins[1 + items[tensor_pos[0]][1]]], outs, axis=tensor_pos[0])
        return
    if tensor_pos != list(range(len(tensor_pos))):
        raise _unsupported(node, "several index tensors are supported on the leading dims only")
    order = [items[p][1] for p in tensor_pos]
    indices = _stacked_indices(b, node, [ins[1 + j] for j in order], [node.inputs[1 + j] for j in order])
    b.add("GatherND", [src, indices], outs)


@emitter("index_put")
def index_put(b, node, ins, outs):
    items = node.attrs["items"]
    x, value = node.inputs[0], node.inputs[1]
    if items and all(it[0] == "t" for it in items):
        values = node.inputs[2:]
        indices = _stacked_indices(b, node, ins[2:], values)
        target = _target_shape(values, x.shape[len(items):])
    elif all(it[0] in ("s", "i") for it in items):
        # basic indexing: the positions it selects, as a constant index grid
        grids = np.meshgrid(*[_positions(it, n) for it, n in zip(items, x.shape)], indexing="ij")
        full = np.stack(grids, -1)
        keep = [i for i, it in enumerate(items) if it[0] == "s"]
        full = full.reshape([full.shape[i] for i in range(len(items)) if i in keep] + [len(items)])
        indices = b.const(full.astype(np.int64), "indices")
        target = tuple(full.shape[:-1]) + tuple(x.shape[len(items):])
    else:
        raise _unsupported(node, "assignment through mixed basic and advanced indices is not supported")
    updates = b.cast(ins[1], value.dtype, x.dtype)
    if tuple(value.shape) != tuple(target):
        updates = b.add("Expand", [updates, b.ints(target)])
    b.add("ScatterND", [ins[0], indices, updates], outs)


def _positions(item, size: int) -> np.ndarray:
    if item[0] == "i":
        return np.array([item[1]])
    start, stop, step = item[1], item[2], item[3]
    return np.arange(start, stop if stop >= 0 else -1, step) if step < 0 else np.arange(start, stop, step)


def _target_shape(values, trailing) -> tuple:
    from ..ops._helpers import broadcast_shapes

    shape: tuple = ()
    for v in values:
        shape = broadcast_shapes("index_put", shape, v.shape)
    return shape + tuple(trailing)


@emitter("gather")
def gather(b, node, ins, outs):
    b.add("GatherElements", ins, outs, axis=node.attrs["dim"])


# --- reductions --------------------------------------------------------------------------------

@emitter("sum")
def sum_(b, node, ins, outs):
    x = _as(b, node, ins, 0, node.outputs[0].dtype)  # integer sums are int64, as the runtime's
    reduce_node(b, "ReduceSum", x, node.attrs["dims"], node.attrs["keepdim"], outs, since=13)


_REDUCE = {"mean": "ReduceMean", "amax": "ReduceMax", "amin": "ReduceMin", "prod": "ReduceProd"}


@emitter(*_REDUCE)
def reduce_(b, node, ins, outs):
    reduce_node(b, _REDUCE[node.op_name], ins[0], node.attrs["dims"], node.attrs["keepdim"], outs)


@emitter("all", "any")
def all_any(b, node, ins, outs):
    x = _as(b, node, ins, 0, _dt.int64)  # ONNX reductions take no bool before opset 20
    y = reduce_node(b, "ReduceMin" if node.op_name == "all" else "ReduceMax", x, node.attrs["dims"],
                    node.attrs["keepdim"])
    b.add("Cast", [y], outs, to=_onnx_type(_dt.bool_))


@emitter("argmax", "argmin")
def arg_extreme(b, node, ins, outs):
    op_type = "ArgMax" if node.op_name == "argmax" else "ArgMin"
    dim, keep = node.attrs["dim"], node.attrs["keepdim"]
    if dim is not None:
        b.add(op_type, ins, outs, axis=dim, keepdims=int(keep))
        return
    flat = b.add("Reshape", [ins[0], b.ints([-1])])
    y = b.add(op_type, [flat], axis=0, keepdims=0)
    b.add("Reshape", [y, b.ints(node.outputs[0].shape)], outs)


@emitter("cumsum")
def cumsum(b, node, ins, outs):
    x = _as(b, node, ins, 0, node.outputs[0].dtype)
    b.add("CumSum", [x, b.const(np.array(node.attrs["dim"], np.int64), "axis")], outs)


# --- attention ---------------------------------------------------------------------------------

@emitter("scaled_dot_product_attention")
def attention(b, node, ins, outs):
    """softmax(q·kᵀ·scale + mask)·v written out: both contractions stay MatMul nodes."""
    a = node.attrs
    if a["dropout_p"] > 0:
        raise _unsupported(node, "attention dropout draws random masks; export the model in eval()")
    q, k, v = node.inputs[0], node.inputs[1], node.inputs[2]
    dtype = q.dtype
    key, value = ins[1], ins[2]
    heads = q.shape[-3] if q.ndim >= 3 else 1
    if a["enable_gqa"] and k.ndim >= 3 and k.shape[-3] != heads:
        key, value = (_repeat_heads(b, name, t, heads // t.shape[-3]) for name, t in ((key, k), (value, v)))
    perm = list(range(k.ndim))
    perm[-1], perm[-2] = perm[-2], perm[-1]
    scores = b.add("MatMul", [ins[0], b.add("Transpose", [key], perm=perm)])
    scale = a["scale"] if a["scale"] is not None else 1 / math.sqrt(q.shape[-1])
    scores = b.add("Mul", [scores, b.scalar(scale, dtype)])
    lq, lk = q.shape[-2], k.shape[-2]
    if a["is_causal"]:
        keep = np.tril(np.ones((lq, lk), dtype=bool))
        scores = b.add("Add", [scores, b.const(np.where(keep, 0, -np.inf).astype(dtype.np), "causal_mask")])
    mask = node.inputs[3]
    if mask is not None:
        if mask.dtype is _dt.bool_:
            scores = b.add("Where", [ins[3], scores, b.scalar(-np.inf, dtype)])
        else:
            scores = b.add("Add", [scores, b.cast(ins[3], mask.dtype, dtype)])
    probs = b.add("Softmax", [scores], axis=-1)
    b.add("MatMul", [probs, value], outs)


def _repeat_heads(b, name: str, t, rep: int) -> str:
    """(..., Hkv, L, D) -> (..., Hkv·rep, L, D), each head repeated for its query group."""
    shape = tuple(t.shape)
    wide = b.add("Unsqueeze", [name, b.ints([len(shape) - 2])])
    wide = b.add("Expand", [wide, b.ints(shape[:-2] + (rep,) + shape[-2:])])
    return b.add("Reshape", [wide, b.ints(shape[:-3] + (shape[-3] * rep,) + shape[-2:])])


# --- fused chains ------------------------------------------------------------------------------

class _Step:
    """A step of a fused chain, shaped like a graph node for the emitters."""

    def __init__(self, op_name, inputs, outputs, attrs, scope):
        self.op_name, self.inputs, self.outputs, self.attrs, self.scope = op_name, inputs, outputs, attrs, scope
        self.name = outputs[0].name


@emitter("fused_elementwise")
def fused(b, node, ins, outs):
    from ..graph.fused import _step_specs

    steps = node.attrs["steps"]
    specs = _step_specs([v.spec for v in node.inputs], steps)
    names, values = [], []
    for k, ((op_name, args, attrs), spec) in enumerate(zip(steps, specs)):
        last = k == len(steps) - 1
        out = Value(outs[0] if last else b.fresh(op_name), spec.shape, spec.dtype, "node")
        step_ins = [node.inputs[a] if a >= 0 else values[-1 - a] for a in args]
        step_names = [ins[a] if a >= 0 else names[-1 - a] for a in args]
        if op_name not in EMITTERS:
            raise _unsupported(node, f"fused step {op_name!r} has no emitter")
        EMITTERS[op_name](b, _Step(op_name, step_ins, [out], dict(attrs), node.scope), step_names, [out.name])
        names.append(out.name)
        values.append(out)


from . import onnx_op_emitters  # noqa: E402,F401  (the ONNX-native ops; they use the helpers above)
